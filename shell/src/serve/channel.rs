//! The server's queues: the jobs the connections hand the engine (bounded:
//! a full queue is a 429) and each job's events back to its connection
//! (unbounded). One queue type, a `VecDeque` under a `Mutex` with a
//! `Condvar`, for every element type: std's `mpsc` channels (three
//! flavours, instantiated per element type) were 10.5 KB of the shipped
//! binary for the three queues (docs/size.md).

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

struct Queue<T> {
    state: Mutex<State<T>>,
    /// Signalled when an item arrives or the last sender leaves.
    ready: Condvar,
    /// Most items waiting.
    cap: usize,
}

struct State<T> {
    items: VecDeque<T>,
    /// Senders alive.
    senders: usize,
    /// Whether the receiver is alive.
    receiver: bool,
}

/// The sending side (cloned for each connection).
pub struct Sender<T>(Arc<Queue<T>>);

/// The receiving side.
pub struct Receiver<T>(Arc<Queue<T>>);

/// Why an item was not sent.
#[derive(Debug, PartialEq, Eq)]
pub enum SendError {
    /// `cap` items are waiting.
    Full,
    /// The receiver is gone.
    Disconnected,
}

/// Why no item was received.
#[derive(Debug, PartialEq, Eq)]
pub enum RecvError {
    /// None came in the time given.
    Empty,
    /// None is waiting and every sender is gone.
    Disconnected,
}

/// A queue of at most `cap` waiting items (`usize::MAX`: unbounded).
pub fn channel<T>(cap: usize) -> (Sender<T>, Receiver<T>) {
    let q = Arc::new(Queue {
        state: Mutex::new(State {
            items: VecDeque::new(),
            senders: 1,
            receiver: true,
        }),
        ready: Condvar::new(),
        cap,
    });
    (Sender(q.clone()), Receiver(q))
}

/// The state, whatever a panicking holder left (the shipped build aborts
/// on panic: no lock is ever poisoned there).
fn lock<T>(q: &Queue<T>) -> MutexGuard<'_, State<T>> {
    q.state.lock().unwrap_or_else(|e| e.into_inner())
}

impl<T> Sender<T> {
    /// Queues `item`, or says why not (the item is dropped).
    pub fn send(&self, item: T) -> Result<(), SendError> {
        let mut s = lock(&self.0);
        if !s.receiver {
            return Err(SendError::Disconnected);
        }
        if s.items.len() >= self.0.cap {
            return Err(SendError::Full);
        }
        s.items.push_back(item);
        drop(s);
        self.0.ready.notify_one();
        Ok(())
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        lock(&self.0).senders += 1;
        Sender(self.0.clone())
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let mut s = lock(&self.0);
        s.senders -= 1;
        if s.senders == 0 {
            drop(s);
            self.0.ready.notify_all();
        }
    }
}

impl<T> Receiver<T> {
    /// The first waiting item, waiting for one up to `wait` (`None`: as
    /// long as a sender is alive; `Some(ZERO)`: not at all).
    pub fn recv(&self, wait: Option<Duration>) -> Result<T, RecvError> {
        let deadline = wait.map(|w| Instant::now() + w);
        let mut s = lock(&self.0);
        loop {
            if let Some(item) = s.items.pop_front() {
                return Ok(item);
            }
            if s.senders == 0 {
                return Err(RecvError::Disconnected);
            }
            s = match deadline {
                None => self.0.ready.wait(s).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(RecvError::Empty);
                    }
                    let (s, _) = self
                        .0
                        .ready
                        .wait_timeout(s, left)
                        .unwrap_or_else(|e| e.into_inner());
                    s
                }
            };
        }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        lock(&self.0).receiver = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_queue_refuses_when_full_and_after_the_receiver_left() {
        let (tx, rx) = channel::<u32>(2);
        assert_eq!(tx.send(1), Ok(()));
        assert_eq!(tx.send(2), Ok(()));
        assert_eq!(tx.send(3), Err(SendError::Full));
        assert_eq!(rx.recv(Some(Duration::ZERO)), Ok(1));
        assert_eq!(tx.send(3), Ok(()));
        assert_eq!(rx.recv(None), Ok(2));
        assert_eq!(rx.recv(None), Ok(3));
        assert_eq!(rx.recv(Some(Duration::ZERO)), Err(RecvError::Empty));
        assert_eq!(
            rx.recv(Some(Duration::from_millis(1))),
            Err(RecvError::Empty)
        );
        drop(rx);
        assert_eq!(tx.send(4), Err(SendError::Disconnected));
    }

    #[test]
    fn the_receiver_sees_what_was_sent_then_that_the_senders_left() {
        let (tx, rx) = channel::<u32>(usize::MAX);
        let tx2 = tx.clone();
        let t = std::thread::spawn(move || {
            for i in 0..100 {
                tx2.send(i).unwrap();
            }
        });
        drop(tx);
        let mut got = Vec::new();
        while let Ok(i) = rx.recv(None) {
            got.push(i);
        }
        t.join().unwrap();
        assert_eq!(got, (0..100).collect::<Vec<_>>());
        assert_eq!(rx.recv(None), Err(RecvError::Disconnected));
    }
}

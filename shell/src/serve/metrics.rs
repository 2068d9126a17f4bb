//! What `GET /metrics` reports, in the Prometheus text format (version
//! 0.0.4): counters (`_total`), gauges, and histograms of seconds
//! (`_bucket`, `_sum`, `_count`). Handlers and the engine thread update
//! atomics; a scrape reads them without stopping anyone.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Upper bounds (seconds) of the latency histograms' buckets: from a fast
/// board's decode step to a long prompt's prefill.
const BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];

/// A histogram of durations.
pub struct Histogram {
    /// Observations at most `BUCKETS[i]` (not cumulative; the scrape sums).
    buckets: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    sum_micros: AtomicU64,
}

impl Histogram {
    const fn new() -> Histogram {
        Histogram {
            buckets: [const { AtomicU64::new(0) }; BUCKETS.len()],
            count: AtomicU64::new(0),
            sum_micros: AtomicU64::new(0),
        }
    }

    pub fn observe(&self, d: Duration) {
        let s = d.as_secs_f64();
        if let Some(i) = BUCKETS.iter().position(|&le| s <= le) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (le, n) in BUCKETS.iter().zip(&self.buckets) {
            cumulative += n.load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {cumulative}");
        }
        // Read after the buckets: the +Inf bucket is never below their sum.
        let count = self.count.load(Ordering::Relaxed).max(cumulative);
        let sum = self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let _ = writeln!(out, "{name}_sum {sum}\n{name}_count {count}");
    }
}

/// The routes counted by name; any other path counts as `other`.
pub const ENDPOINTS: [&str; 7] = [
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/embeddings",
    "/v1/models",
    "/health",
    "/metrics",
    "other",
];

/// Everything `/metrics` reports.
pub struct Metrics {
    /// (endpoint index, status) -> answers.
    requests: Mutex<Vec<(usize, u16, u64)>>,
    pub prompt_tokens: AtomicU64,
    pub generated_tokens: AtomicU64,
    /// Tokens drafted for speculative decoding (lookup, `prediction`).
    pub drafted_tokens: AtomicU64,
    /// Drafted tokens accepted.
    pub accepted_tokens: AtomicU64,
    /// Jobs queued and not yet taken by the engine.
    pub queued: AtomicUsize,
    /// Slots admitting a prompt or generating (set by the engine).
    pub slots_busy: AtomicUsize,
    pub slots: usize,
    /// KV positions holding a token, over all slots (set by the engine).
    pub kv_used: AtomicUsize,
    pub kv_total: usize,
    /// Connections accepted (each may carry several requests).
    pub connections: AtomicU64,
    pub time_to_first_token: Histogram,
    pub time_between_tokens: Histogram,
}

impl Metrics {
    pub fn new(slots: usize, ctx: usize) -> Metrics {
        Metrics {
            requests: Mutex::new(Vec::new()),
            prompt_tokens: AtomicU64::new(0),
            generated_tokens: AtomicU64::new(0),
            drafted_tokens: AtomicU64::new(0),
            accepted_tokens: AtomicU64::new(0),
            queued: AtomicUsize::new(0),
            connections: AtomicU64::new(0),
            slots_busy: AtomicUsize::new(0),
            slots,
            kv_used: AtomicUsize::new(0),
            kv_total: slots.saturating_mul(ctx),
            time_to_first_token: Histogram::new(),
            time_between_tokens: Histogram::new(),
        }
    }

    /// Counts one answer to `path` with `status`.
    pub fn request(&self, path: &str, status: u16) {
        let e = ENDPOINTS
            .iter()
            .position(|&p| p == path)
            .unwrap_or(ENDPOINTS.len() - 1);
        let mut r = self.requests.lock().unwrap_or_else(|p| p.into_inner());
        match r.iter_mut().find(|(i, s, _)| (*i, *s) == (e, status)) {
            Some(entry) => entry.2 += 1,
            None => r.push((e, status, 1)),
        }
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# HELP kestrel_requests_total HTTP requests answered, by endpoint and status.\n# TYPE kestrel_requests_total counter"
        );
        let mut requests = self
            .requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        kestrel_core::sort::sort_by(&mut requests, |a, b| a.cmp(b));
        for (e, status, n) in requests {
            let _ = writeln!(
                out,
                "kestrel_requests_total{{endpoint=\"{}\",status=\"{status}\"}} {n}",
                ENDPOINTS[e]
            );
        }
        let load = |a: &AtomicUsize| a.load(Ordering::Relaxed) as u64;
        let series: [(&str, &str, &str, u64); 10] = [
            (
                "kestrel_connections_accepted_total",
                "counter",
                "Connections accepted (persistent: each may carry several requests).",
                self.connections.load(Ordering::Relaxed),
            ),
            (
                "kestrel_prompt_tokens_total",
                "counter",
                "Prompt tokens of the generation requests queued.",
                self.prompt_tokens.load(Ordering::Relaxed),
            ),
            (
                "kestrel_generated_tokens_total",
                "counter",
                "Tokens generated.",
                self.generated_tokens.load(Ordering::Relaxed),
            ),
            (
                "kestrel_drafted_tokens_total",
                "counter",
                "Tokens drafted for speculative decoding (lookup, prediction).",
                self.drafted_tokens.load(Ordering::Relaxed),
            ),
            (
                "kestrel_accepted_tokens_total",
                "counter",
                "Drafted tokens accepted (each saved a decode step).",
                self.accepted_tokens.load(Ordering::Relaxed),
            ),
            (
                "kestrel_queue_depth",
                "gauge",
                "Requests waiting for a slot.",
                load(&self.queued),
            ),
            (
                "kestrel_slots_busy",
                "gauge",
                "Slots admitting a prompt or generating.",
                load(&self.slots_busy),
            ),
            (
                "kestrel_slots",
                "gauge",
                "Slots (--parallel).",
                self.slots as u64,
            ),
            (
                "kestrel_kv_positions_used",
                "gauge",
                "KV cache positions holding a token, over all slots.",
                load(&self.kv_used),
            ),
            (
                "kestrel_kv_positions",
                "gauge",
                "KV cache positions, over all slots.",
                self.kv_total as u64,
            ),
        ];
        for (name, kind, help, v) in series {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}"
            );
        }
        self.time_to_first_token.render(
            &mut out,
            "kestrel_time_to_first_token_seconds",
            "From a generation request's queueing to its first token.",
        );
        self.time_between_tokens.render(
            &mut out,
            "kestrel_time_between_tokens_seconds",
            "Between consecutive tokens of one answer.",
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition() {
        let m = Metrics::new(2, 100);
        m.request("/v1/completions", 200);
        m.request("/v1/completions", 200);
        m.request("/nope", 404);
        m.time_to_first_token.observe(Duration::from_millis(30));
        m.time_to_first_token.observe(Duration::from_secs(1000));
        let text = m.render();
        for line in [
            "kestrel_requests_total{endpoint=\"/v1/completions\",status=\"200\"} 2",
            "kestrel_requests_total{endpoint=\"other\",status=\"404\"} 1",
            "kestrel_slots 2",
            "kestrel_kv_positions 200",
            "kestrel_time_to_first_token_seconds_bucket{le=\"0.025\"} 0",
            "kestrel_time_to_first_token_seconds_bucket{le=\"0.05\"} 1",
            "kestrel_time_to_first_token_seconds_bucket{le=\"120\"} 1",
            "kestrel_time_to_first_token_seconds_bucket{le=\"+Inf\"} 2",
            "kestrel_time_to_first_token_seconds_sum 1000.03",
            "kestrel_time_to_first_token_seconds_count 2",
            "kestrel_time_between_tokens_seconds_count 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line}\n{text}");
        }
    }
}

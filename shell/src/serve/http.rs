//! The HTTP/1.1 subset `kestrel serve` speaks: persistent connections
//! (HTTP/1.1's default; `Connection: close` and HTTP/1.0 without
//! `keep-alive` end after one answer) with pipelined requests answered in
//! order, bodies by `Content-Length` only, a bounded head and body read
//! before deadlines, and plain or server-sent-event responses (an event
//! stream ends its connection). [`parse_head`] is a pure function over
//! bytes (fuzzed).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Largest request head (request line and headers) accepted.
pub const MAX_HEAD: usize = 16 * 1024;
/// Most header lines accepted.
pub const MAX_HEADERS: usize = 64;

/// An error answered with `status` and an OpenAI-style JSON body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpError {
    pub status: u16,
    pub message: String,
}

impl HttpError {
    pub fn new(status: u16, message: impl std::fmt::Display) -> HttpError {
        HttpError {
            status,
            message: message.to_string(),
        }
    }
}

/// What the server needs from a request head.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Head {
    pub method: String,
    /// The path, without the query string.
    pub path: String,
    pub content_length: Option<usize>,
    /// The `Authorization` header's value.
    pub authorization: Option<String>,
    /// The `Content-Type` header's media type (parameters dropped).
    pub content_type: Option<String>,
    /// `Expect: 100-continue` was sent.
    pub expect_continue: bool,
    /// The connection ends after this request's answer: `Connection:
    /// close`, or HTTP/1.0 without `Connection: keep-alive`.
    pub close: bool,
}

/// A client connection: the socket, the bytes read past the last request
/// (the start of a pipelined next one), and whether the answer being
/// written leaves it open.
pub struct Conn<'a> {
    pub stream: TcpStream,
    /// Read but not yet used: the start of the next request.
    pending: Vec<u8>,
    /// The answer being written says `Connection: keep-alive` (else
    /// `close`, and the connection ends after it).
    pub keep_alive: bool,
    /// Counts the request being answered, with its status: called by
    /// [`write_response`] before the answer's bytes go out, so a client
    /// that has read an answer finds it counted (the connection may stay
    /// open); else by the caller once the answer is done.
    pub count: Option<Box<dyn FnOnce(u16) + 'a>>,
}

impl<'a> Conn<'a> {
    /// Whether bytes of a next request were read already (pipelined).
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    pub fn new(stream: TcpStream) -> Conn<'a> {
        Conn {
            stream,
            pending: Vec::new(),
            keep_alive: false,
            count: None,
        }
    }

    /// Counts the request with `status`, if it was not counted yet.
    pub fn counted(&mut self, status: u16) {
        if let Some(count) = self.count.take() {
            count(status);
        }
    }
}

fn is_token_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c)
}

/// Parses a request head: `bytes` is everything before the blank line
/// (`\r\n\r\n`, excluded). Rejects what it does not understand with 400,
/// chunked bodies with 411, other HTTP versions with 505.
pub fn parse_head(bytes: &[u8]) -> Result<Head, HttpError> {
    let bad = |m: &str| HttpError::new(400, format!("malformed HTTP request: {m}"));
    if bytes.len() > MAX_HEAD {
        return Err(HttpError::new(431, "request head larger than 16 KiB"));
    }
    let text = std::str::from_utf8(bytes).map_err(|_| bad("the head is not UTF-8"))?;
    let mut lines = text.split("\r\n");
    let request_line = lines.next().unwrap_or("");
    // A stray CR (`\r\r\n`) or another control character.
    if request_line.bytes().any(|c| c < b' ' || c == 0x7f) {
        return Err(bad("a control character in the request line"));
    }
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad("the request line is not `METHOD TARGET HTTP/1.x`"));
    };
    if method.is_empty() || !method.bytes().all(is_token_char) {
        return Err(bad("invalid method"));
    }
    if !target.starts_with('/') || target.bytes().any(|c| c <= b' ' || c == 0x7f) {
        return Err(bad("the target must be an absolute path"));
    }
    match version {
        "HTTP/1.1" | "HTTP/1.0" => {}
        v if v.starts_with("HTTP/") => {
            return Err(HttpError::new(
                505,
                "only HTTP/1.0 and HTTP/1.1 are supported",
            ))
        }
        _ => return Err(bad("invalid HTTP version")),
    }
    let path = target.split('?').next().unwrap_or(target);
    let mut head = Head {
        method: method.to_string(),
        path: path.to_string(),
        close: version == "HTTP/1.0",
        ..Head::default()
    };
    let mut hosts = 0;
    for (count, line) in lines.enumerate() {
        if count >= MAX_HEADERS {
            return Err(HttpError::new(431, "more than 64 header lines"));
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(bad("a header line without ':'"));
        };
        if name.is_empty() || !name.bytes().all(is_token_char) {
            return Err(bad("invalid header name"));
        }
        if value.bytes().any(|c| (c < b' ' && c != b'\t') || c == 0x7f) {
            return Err(bad("control character in a header value"));
        }
        let value = value.trim_matches([' ', '\t']);
        if name.eq_ignore_ascii_case("content-length") {
            let n = parse_length(value).ok_or_else(|| bad("invalid Content-Length"))?;
            if head.content_length.is_some_and(|m| m != n) {
                return Err(bad("conflicting Content-Length headers"));
            }
            head.content_length = Some(n);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            if value.eq_ignore_ascii_case("identity") {
                continue;
            }
            return Err(HttpError::new(
                411,
                "chunked request bodies are not supported: send Content-Length",
            ));
        } else if name.eq_ignore_ascii_case("authorization") {
            // Two credentials: which one a proxy checked is unknowable.
            if head.authorization.is_some() {
                return Err(bad("more than one Authorization header"));
            }
            head.authorization = Some(value.to_string());
        } else if name.eq_ignore_ascii_case("content-type") {
            if head.content_type.is_some() {
                return Err(bad("more than one Content-Type header"));
            }
            let media = value
                .split(';')
                .next()
                .unwrap_or("")
                .trim_matches([' ', '\t']);
            head.content_type = Some(media.to_ascii_lowercase());
        } else if name.eq_ignore_ascii_case("connection") {
            // A list of tokens (RFC 9110, 7.6.1): `close` wins.
            for token in value.split(',').map(|t| t.trim_matches([' ', '\t'])) {
                if token.eq_ignore_ascii_case("close") {
                    head.close = true;
                } else if token.eq_ignore_ascii_case("keep-alive") && version == "HTTP/1.0" {
                    head.close = false;
                }
            }
        } else if name.eq_ignore_ascii_case("host") {
            hosts += 1;
        } else if name.eq_ignore_ascii_case("expect") {
            if !value.eq_ignore_ascii_case("100-continue") {
                return Err(HttpError::new(417, "unsupported Expect header"));
            }
            head.expect_continue = true;
        }
    }
    // HTTP/1.1 requires exactly one Host header (RFC 9112, 3.2).
    if version == "HTTP/1.1" && hosts != 1 {
        return Err(bad(if hosts == 0 {
            "no Host header (HTTP/1.1 requires one)"
        } else {
            "more than one Host header"
        }));
    }
    Ok(head)
}

/// A decimal length of at most 15 digits (no sign, no spaces).
fn parse_length(s: &str) -> Option<usize> {
    if s.is_empty() || s.len() > 15 || !s.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Where the head ends: the offset of `\r\n\r\n`.
fn find_blank_line(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n")
}

/// Reads into `buf` until `deadline`; `Ok(0)` at end of stream.
fn read_before(
    stream: &mut TcpStream,
    buf: &mut [u8],
    deadline: Instant,
) -> Result<usize, HttpError> {
    let timeout = || HttpError::new(408, "timed out reading the request");
    let left = deadline
        .checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
        .ok_or_else(timeout)?;
    stream
        .set_read_timeout(Some(left.max(Duration::from_millis(1))))
        .map_err(|_| timeout())?;
    loop {
        match stream.read(buf) {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(timeout())
            }
            Err(_) => return Err(HttpError::new(400, "connection error while reading")),
        }
    }
}

/// A request head read, with the bytes read past it (the body's start).
pub struct HeadRead {
    pub head: Head,
    rest: Vec<u8>,
}

/// Reads the next request head of `conn` within `timeout`. `Ok(None)` when
/// the connection ends cleanly before a request starts: the client closed
/// it, or (after a first request) sent nothing within `idle`. Nothing of
/// the body is asked for: the caller admits the request from its head
/// ([`read_body`] then reads it; `Expect: 100-continue` is answered only
/// then).
pub fn read_head(
    conn: &mut Conn,
    timeout: Duration,
    idle: Option<Duration>,
) -> Result<Option<HeadRead>, HttpError> {
    let start = Instant::now();
    let deadline = start + timeout;
    // (MAX_HEAD + 4 + part of the body) bytes at most.
    let mut buf: Vec<u8> = std::mem::take(&mut conn.pending);
    let mut chunk = [0u8; 4096];
    let mut scanned: usize = 0;
    let end = loop {
        // Only the new bytes (and 3 before them) can complete "\r\n\r\n".
        let from = scanned.saturating_sub(3);
        scanned = buf.len();
        let blank = find_blank_line(&buf[from..]).map(|i| from + i);
        // A line feed without its carriage return in the head (bare-LF
        // line endings): refused at once, not after the timeout.
        let head_end = blank.unwrap_or(buf.len());
        let first = from.max(1);
        if buf.first() == Some(&b'\n')
            || (first..head_end).any(|i| buf[i] == b'\n' && buf[i - 1] != b'\r')
        {
            return Err(HttpError::new(
                400,
                "malformed HTTP request: a line ends in a bare LF (CRLF required)",
            ));
        }
        if let Some(end) = blank {
            break end;
        }
        if buf.len() > MAX_HEAD + 3 {
            return Err(HttpError::new(431, "request head larger than 16 KiB"));
        }
        // Between requests the wait is the idle time, not the timeout.
        let wait = match idle {
            Some(idle) if buf.is_empty() => (start + idle).min(deadline),
            _ => deadline,
        };
        let n = match read_before(&mut conn.stream, &mut chunk, wait) {
            Err(e) if e.status == 408 && buf.is_empty() && idle.is_some() => return Ok(None),
            r => r?,
        };
        if n == 0 {
            if buf.is_empty() {
                return Ok(None);
            }
            return Err(HttpError::new(
                400,
                "connection closed before the request head ended",
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = parse_head(&buf[..end])?;
    let rest = buf.split_off(end + 4);
    Ok(Some(HeadRead { head, rest }))
}

/// Reads the body of an admitted request: at most `max_body` bytes within
/// `timeout` (bytes past it are the start of a pipelined next request).
pub fn read_body(
    conn: &mut Conn,
    read: HeadRead,
    timeout: Duration,
    max_body: usize,
) -> Result<(Head, Vec<u8>), HttpError> {
    let HeadRead { head, rest } = read;
    let len = match (head.method.as_str(), head.content_length) {
        (_, Some(n)) => n,
        ("POST" | "PUT" | "PATCH", None) => {
            return Err(HttpError::new(411, "a request body needs Content-Length"))
        }
        _ => 0,
    };
    if len > max_body {
        return Err(HttpError::new(
            413,
            format!("request body of {len} bytes is over the limit of {max_body}"),
        ));
    }
    let mut body = rest;
    let mut chunk = [0u8; 4096];
    if body.len() > len {
        // The start of a pipelined next request.
        conn.pending = body.split_off(len);
    }
    if head.expect_continue && body.len() < len {
        let _ = conn.stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
    }
    let deadline = Instant::now() + timeout;
    body.reserve_exact(len - body.len());
    while body.len() < len {
        let want = (len - body.len()).min(chunk.len());
        let n = read_before(&mut conn.stream, &mut chunk[..want], deadline)?;
        if n == 0 {
            return Err(HttpError::new(
                400,
                "connection closed before the body ended",
            ));
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Ok((head, body))
}

/// The reason phrase of the statuses the server sends.
pub fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        417 => "Expectation Failed",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Error",
    }
}

/// The head of a whole response. Busy answers (429: the queue is full;
/// 503: too many connections, or /health while the queue is full) say
/// when to retry.
fn response_head(status: u16, content_type: &str, len: usize, keep_alive: bool) -> String {
    let retry = if matches!(status, 429 | 503) {
        "Retry-After: 1\r\n"
    } else {
        ""
    };
    let connection = if keep_alive { "keep-alive" } else { "close" };
    format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {len}\r\n{retry}Connection: {connection}\r\n\r\n",
        reason(status),
    )
}

/// Writes a whole response with a body (`Connection: keep-alive` while
/// `conn.keep_alive`).
pub fn write_response(
    conn: &mut Conn,
    status: u16,
    content_type: &str,
    body: &[u8],
) -> std::io::Result<()> {
    conn.counted(status);
    let head = response_head(status, content_type, body.len(), conn.keep_alive);
    let mut all = Vec::with_capacity(head.len() + body.len());
    all.extend_from_slice(head.as_bytes());
    all.extend_from_slice(body);
    conn.stream.write_all(&all)?;
    conn.stream.flush()
}

/// Starts a server-sent-event stream: the body runs until the connection
/// closes, so the connection ends with it.
pub fn write_sse_head(conn: &mut Conn) -> std::io::Result<()> {
    conn.keep_alive = false;
    conn.stream.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nX-Accel-Buffering: no\r\nConnection: close\r\n\r\n",
    )
}

/// One event: `data: {json}\n\n`.
pub fn write_sse_data(conn: &mut Conn, data: &str) -> std::io::Result<()> {
    let mut ev = String::with_capacity(data.len() + 8);
    ev.push_str("data: ");
    ev.push_str(data);
    ev.push_str("\n\n");
    conn.stream.write_all(ev.as_bytes())?;
    conn.stream.flush()
}

/// Whether the peer has closed the connection (a zero-byte peek), without
/// blocking. Bytes of a pipelined next request count as open.
pub fn peer_closed(conn: &Conn) -> bool {
    let stream = &conn.stream;
    if stream.set_nonblocking(true).is_err() {
        return true;
    }
    let mut b = [0u8; 1];
    let closed = match stream.peek(&mut b) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    };
    let _ = stream.set_nonblocking(false);
    closed
}

/// Closes after an answer sent before the request was read to its end:
/// shuts our side for writing, then drains what the client still sends
/// (at most 256 KiB, for at most 200 ms) so it reads the answer instead of
/// a connection reset.
pub fn linger_close(conn: &mut Conn) {
    conn.keep_alive = false;
    let stream = &mut conn.stream;
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let deadline = Instant::now() + Duration::from_millis(200);
    let mut buf = [0u8; 4096];
    let mut drained = 0usize;
    while drained < 256 * 1024 {
        match read_before(stream, &mut buf, deadline) {
            Ok(n) if n > 0 => drained += n,
            _ => break,
        }
    }
}

/// `a == b` in time that depends only on the lengths (API keys).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = (a.len() ^ b.len()) as u64;
    let n = a.len().max(b.len());
    for i in 0..n {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= u64::from(x ^ y);
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads() {
        let h = parse_head(b"POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\nAuthorization: Bearer k").unwrap();
        assert_eq!(h.path, "/v1/chat/completions");
        assert_eq!(h.content_length, Some(12));
        assert_eq!(h.authorization.as_deref(), Some("Bearer k"));
        let h = parse_head(
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Type: Application/JSON; charset=utf-8",
        )
        .unwrap();
        assert_eq!(h.content_type.as_deref(), Some("application/json"));
        for bad in [
            &b""[..],
            b"GET",
            b"GET / HTTP/1.1 x",
            b"GET x HTTP/1.1",
            b"GET / HTTP/1.1\r\nNoColon",
            b"GET / HTTP/1.1\r\nContent-Length: -1",
            b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2",
            b"GET / \xff HTTP/1.1",
            b"GET / HTTP/1.1\r\nAuthorization: Bearer a\r\nauthorization: Bearer b",
            b"POST / HTTP/1.1\r\nContent-Type: application/json\r\nContent-Type: text/plain",
            // A stray CR ends the request line: not a version to refuse.
            b"GET / HTTP/1.1\r\r\nHost: a",
            b"GET / HTTP/1.1\r",
            // HTTP/1.1 needs exactly one Host.
            b"GET / HTTP/1.1",
            b"GET / HTTP/1.1\r\nHost: a\r\nhost: b",
        ] {
            assert_eq!(parse_head(bad).unwrap_err().status, 400, "{bad:?}");
        }
        assert_eq!(
            parse_head(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked")
                .unwrap_err()
                .status,
            411
        );
        assert_eq!(parse_head(b"GET / HTTP/2.0").unwrap_err().status, 505);
        assert!(response_head(429, "a", 0, false).contains("\r\nRetry-After: 1\r\n"));
        assert!(response_head(503, "a", 0, true).contains("\r\nRetry-After: 1\r\n"));
        assert!(!response_head(200, "a", 0, true).contains("Retry-After"));
        assert!(response_head(200, "a", 0, true).contains("\r\nConnection: keep-alive\r\n"));
        assert!(response_head(200, "a", 0, false).contains("\r\nConnection: close\r\n"));
        // HTTP/1.1 stays open unless `close` is among the Connection tokens;
        // HTTP/1.0 closes unless it asks for keep-alive.
        let close = |h: &[u8]| parse_head(h).unwrap().close;
        assert!(!close(b"GET / HTTP/1.1\r\nHost: a"));
        assert!(close(
            b"GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, Close"
        ));
        assert!(close(b"GET / HTTP/1.0"));
        assert!(!close(b"GET / HTTP/1.0\r\nConnection: keep-alive"));
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
    }
}

//! A tiny blocking HTTP/1.1 GET over `std::net::TcpStream`, enough to scrape
//! a node's `/metrics`: plain `http://` only, connect/read/write timeouts,
//! `Content-Length`, chunked or read-to-close bodies, and every size bounded
//! (status line and headers, body up to [`MAX_BYTES`]).

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use super::exposition::MAX_BYTES;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
const IO_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_HEADER_LINE: u64 = 8 << 10;
const MAX_HEADERS: usize = 100;

/// Where to GET from: `http://HOST:PORT/PATH`.
#[derive(Clone, Debug, PartialEq)]
pub struct Url {
    /// `HOST:PORT` as written (also the `Host` header).
    pub authority: String,
    /// Path with query, starting with '/'.
    pub path: String,
}

impl Url {
    /// Parses `http://HOST:PORT[/PATH]` (or `HOST:PORT`); the path defaults to `/metrics`.
    pub fn parse(text: &str) -> Result<Url, UrlError> {
        let text = text.trim();
        let rest = match text.split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => rest,
            Some((scheme, _)) => return Err(UrlError::Scheme(scheme.to_string())),
            None => text,
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (rest.get(..i).unwrap_or(""), rest.get(i..).unwrap_or("/")),
            None => (rest, ""),
        };
        let path = if path.is_empty() || path == "/" {
            "/metrics"
        } else {
            path
        };
        let port_ok = authority
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if !port_ok || authority.chars().any(|c| c.is_whitespace() || c == '@') {
            return Err(UrlError::Authority(authority.to_string()));
        }
        Ok(Url {
            authority: authority.to_string(),
            path: path.to_string(),
        })
    }
}

impl std::fmt::Display for Url {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "http://{}{}", self.authority, self.path)
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum UrlError {
    #[error("only http:// URLs are supported, not {0}://")]
    Scheme(String),
    #[error("'{0}' is not HOST:PORT")]
    Authority(String),
}

/// Why a GET failed.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("cannot resolve {authority}")]
    Resolve {
        authority: String,
        #[source]
        source: io::Error,
    },
    #[error("cannot connect: {source}")]
    Connect {
        #[source]
        source: io::Error,
    },
    #[error("{source}")]
    Io {
        #[source]
        source: io::Error,
    },
    #[error("malformed HTTP response: {0}")]
    Malformed(&'static str),
    #[error("HTTP status {code} {reason}")]
    Status { code: u16, reason: String },
    #[error("response body larger than {MAX_BYTES} bytes")]
    TooLarge,
    #[error("response body is not UTF-8")]
    NotUtf8,
}

impl From<io::Error> for HttpError {
    fn from(source: io::Error) -> Self {
        HttpError::Io { source }
    }
}

/// GETs `url` and returns the body of a 200 response.
pub fn get(url: &Url) -> Result<String, HttpError> {
    let addrs = url
        .authority
        .to_socket_addrs()
        .map_err(|source| HttpError::Resolve {
            authority: url.authority.clone(),
            source,
        })?;
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
    let mut stream = None;
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = e,
        }
    }
    let mut stream = stream.ok_or(HttpError::Connect { source: last })?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: weft-stats\r\n\
         Accept: text/plain;version=0.0.4\r\nConnection: close\r\n\r\n",
        url.path, url.authority
    );
    stream.write_all(request.as_bytes())?;
    read_response(BufReader::new(stream))
}

/// Reads one line (CRLF or LF) of at most `MAX_HEADER_LINE` bytes.
fn header_line<R: BufRead>(r: &mut R) -> Result<String, HttpError> {
    let mut buf = Vec::new();
    r.take(MAX_HEADER_LINE).read_until(b'\n', &mut buf)?;
    if buf.last() != Some(&b'\n') {
        return Err(HttpError::Malformed(if buf.is_empty() {
            "connection closed before the headers ended"
        } else {
            "header line too long or cut off"
        }));
    }
    let line = String::from_utf8(buf).map_err(|_| HttpError::Malformed("header not UTF-8"))?;
    Ok(line.trim_end_matches(['\r', '\n']).to_string())
}

/// Parses a response: status line, headers, body; an error unless 200.
pub fn read_response<R: BufRead>(mut r: R) -> Result<String, HttpError> {
    let status = header_line(&mut r)?;
    let mut parts = status.splitn(3, ' ');
    let version = parts.next().unwrap_or("");
    if !version.starts_with("HTTP/1.") {
        return Err(HttpError::Malformed("not an HTTP/1.x status line"));
    }
    let code: u16 = parts
        .next()
        .and_then(|c| c.parse().ok())
        .ok_or(HttpError::Malformed("bad status code"))?;
    let reason = parts.next().unwrap_or("").to_string();
    let mut length: Option<u64> = None;
    let mut chunked = false;
    let mut headers = 0;
    loop {
        let line = header_line(&mut r)?;
        if line.is_empty() {
            break;
        }
        headers += 1;
        if headers > MAX_HEADERS {
            return Err(HttpError::Malformed("too many headers"));
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(HttpError::Malformed("header without ':'"));
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            length = Some(
                value
                    .parse()
                    .map_err(|_| HttpError::Malformed("bad Content-Length"))?,
            );
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.to_ascii_lowercase().contains("chunked");
        }
    }
    if code != 200 {
        return Err(HttpError::Status { code, reason });
    }
    let body = if chunked {
        read_chunked(&mut r)?
    } else if let Some(n) = length {
        if n > MAX_BYTES as u64 {
            return Err(HttpError::TooLarge);
        }
        let mut body = Vec::new();
        r.take(n).read_to_end(&mut body)?;
        if (body.len() as u64) < n {
            return Err(HttpError::Malformed("body shorter than Content-Length"));
        }
        body
    } else {
        read_bounded(&mut r, MAX_BYTES as u64)?
    };
    String::from_utf8(body).map_err(|_| HttpError::NotUtf8)
}

/// Reads to end of stream, failing if more than `max` bytes come.
fn read_bounded<R: Read>(r: &mut R, max: u64) -> Result<Vec<u8>, HttpError> {
    let mut body = Vec::new();
    r.take(max + 1).read_to_end(&mut body)?;
    if body.len() as u64 > max {
        return Err(HttpError::TooLarge);
    }
    Ok(body)
}

fn read_chunked<R: BufRead>(r: &mut R) -> Result<Vec<u8>, HttpError> {
    let mut body = Vec::new();
    loop {
        let line = header_line(r)?;
        let size = line.split(';').next().unwrap_or("").trim();
        let size =
            u64::from_str_radix(size, 16).map_err(|_| HttpError::Malformed("bad chunk size"))?;
        if size == 0 {
            // Trailers until the empty line; a server that closes early is fine.
            while let Ok(l) = header_line(r) {
                if l.is_empty() {
                    break;
                }
            }
            return Ok(body);
        }
        if body.len() as u64 + size > MAX_BYTES as u64 {
            return Err(HttpError::TooLarge);
        }
        let before = body.len();
        r.take(size).read_to_end(&mut body)?;
        if ((body.len() - before) as u64) < size {
            return Err(HttpError::Malformed("chunk cut off"));
        }
        if !header_line(r)?.is_empty() {
            return Err(HttpError::Malformed("chunk not followed by CRLF"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn resp(s: &str) -> Result<String, HttpError> {
        read_response(s.as_bytes())
    }

    #[test]
    fn urls() {
        let u = Url::parse("http://127.0.0.1:9191").unwrap();
        assert_eq!(u.authority, "127.0.0.1:9191");
        assert_eq!(u.path, "/metrics");
        assert_eq!(u.to_string(), "http://127.0.0.1:9191/metrics");
        assert_eq!(Url::parse("localhost:80/m?x=1").unwrap().path, "/m?x=1");
        assert_eq!(Url::parse("[::1]:9191").unwrap().authority, "[::1]:9191");
        assert_eq!(
            Url::parse("https://h:1"),
            Err(UrlError::Scheme("https".into()))
        );
        assert_eq!(Url::parse("http://h"), Err(UrlError::Authority("h".into())));
        assert!(Url::parse("http://:99").is_err());
        assert!(Url::parse("").is_err());
    }

    #[test]
    fn bodies_by_length_chunks_and_close() {
        let r = resp("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloEXTRA").unwrap();
        assert_eq!(r, "hello");
        let r = resp(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!(r, "abcde");
        let r = resp("HTTP/1.0 200 OK\nContent-Type: text/plain\n\nall of it").unwrap();
        assert_eq!(r, "all of it");
    }

    #[test]
    fn bad_responses_are_named() {
        assert!(matches!(
            resp("HTTP/1.1 404 Not Found\r\n\r\nnope"),
            Err(HttpError::Status { code: 404, ref reason }) if reason == "Not Found"
        ));
        assert!(matches!(resp(""), Err(HttpError::Malformed(_))));
        assert!(matches!(
            resp("SSH-2.0-OpenSSH\r\n"),
            Err(HttpError::Malformed(_))
        ));
        assert!(matches!(
            resp("HTTP/1.1 abc\r\n\r\n"),
            Err(HttpError::Malformed(_))
        ));
        assert!(matches!(
            resp("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort"),
            Err(HttpError::Malformed(_))
        ));
        assert!(matches!(
            resp("HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n"),
            Err(HttpError::TooLarge)
        ));
        assert!(matches!(
            resp("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"),
            Err(HttpError::Malformed(_))
        ));
        assert!(matches!(
            resp("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab"),
            Err(HttpError::Malformed(_))
        ));
        let long = format!("HTTP/1.1 200 OK\r\nX: {}\r\n\r\n", "a".repeat(10_000));
        assert!(matches!(resp(&long), Err(HttpError::Malformed(_))));
        let mut bytes = b"HTTP/1.1 200 OK\r\n\r\n".to_vec();
        bytes.extend_from_slice(&[0xff, 0xfe]);
        assert!(matches!(read_response(&bytes[..]), Err(HttpError::NotUtf8)));
    }

    #[test]
    fn get_from_a_local_server_and_refused() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut req = [0u8; 1024];
            let n = s.read(&mut req).unwrap();
            let req = String::from_utf8_lossy(&req[..n]).to_string();
            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nx 1\n")
                .unwrap();
            req
        });
        let url = Url::parse(&format!("http://{addr}")).unwrap();
        assert_eq!(get(&url).unwrap(), "x 1\n");
        let req = server.join().unwrap();
        assert!(req.starts_with("GET /metrics HTTP/1.1\r\n"), "{req}");
        assert!(req.contains(&format!("Host: {addr}\r\n")));
        // The port is free again: connection refused.
        assert!(matches!(get(&url), Err(HttpError::Connect { .. })));
    }
}

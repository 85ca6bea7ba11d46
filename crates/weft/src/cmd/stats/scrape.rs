//! Where the metrics come from and how one scrape is taken: the node's HTTP
//! address from `<data>/run/http.addr` (or `--url`), a GET of `/metrics`,
//! and the exposition parsed into a typed [`Sample`]. Errors name the data
//! directory or the URL and what was wrong.

use std::path::Path;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, Context, Result};

use super::exposition;
use super::http::{self, HttpError, Url};
use super::sample::{Sample, Totals};

/// The file, under the data directory, where a node writes its HTTP address.
pub const HTTP_ADDR_FILE: &str = "run/http.addr";

/// A node's metrics endpoint.
pub struct Source {
    pub url: Url,
}

impl Source {
    /// From an explicit `--url`.
    pub fn from_url(text: &str) -> Result<Source> {
        let url = Url::parse(text).with_context(|| format!("--url {text}"))?;
        Ok(Source { url })
    }

    /// From the node running on data directory `data`.
    pub fn from_data_dir(data: &Path) -> Result<Source> {
        let file = data.join(HTTP_ADDR_FILE);
        let text = match std::fs::read_to_string(&file) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(anyhow!(
                    "no Weft node is running for data directory {} ({} is absent): start one \
                     with `weft up --data {}` (or `weft node run --data {}`), or give the \
                     metrics address with --url http://HOST:PORT",
                    data.display(),
                    file.display(),
                    data.display(),
                    data.display(),
                ))
            }
            Err(e) => return Err(e).with_context(|| format!("reading {}", file.display())),
        };
        let addr = text.lines().next().unwrap_or("").trim();
        let url = Url::parse(addr)
            .with_context(|| format!("{} holds {addr:?}, not HOST:PORT", file.display()))?;
        Ok(Source { url })
    }

    /// Takes one scrape.
    pub fn scrape(&self) -> Result<Sample> {
        let body = http::get(&self.url).map_err(|e| match e {
            HttpError::Connect { ref source }
                if source.kind() == std::io::ErrorKind::ConnectionRefused =>
            {
                anyhow!(
                    "cannot connect to {}: connection refused (is the node running, with \
                     its metrics endpoint on this address?)",
                    self.url
                )
            }
            e => anyhow!(e).context(format!("scraping {}", self.url)),
        })?;
        let at = Instant::now();
        let time_unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let series = exposition::parse(&body)
            .with_context(|| format!("{} did not serve a Prometheus exposition", self.url))?;
        let (totals, node) = Totals::from_series(&series);
        Ok(Sample {
            at,
            time_unix_ms,
            node,
            totals,
        })
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    /// Serves each body once, in order, as a 200 response.
    pub fn serve(bodies: Vec<String>) -> (String, std::thread::JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let handle = std::thread::spawn(move || {
            for body in bodies {
                let (mut s, _) = listener.accept().unwrap();
                let mut req = [0u8; 2048];
                let _ = s.read(&mut req).unwrap();
                let head = if body.starts_with("HTTP/") {
                    String::new()
                } else {
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n\
                         Content-Length: {}\r\n\r\n",
                        body.len()
                    )
                };
                s.write_all(head.as_bytes()).unwrap();
                s.write_all(body.as_bytes()).unwrap();
            }
        });
        (addr, handle)
    }

    #[test]
    fn missing_addr_file_says_how_to_start() {
        let dir = tempfile::tempdir().unwrap();
        let e = Source::from_data_dir(dir.path()).err().unwrap();
        let msg = format!("{e:#}");
        assert!(msg.contains("no Weft node is running"), "{msg}");
        assert!(msg.contains("weft up --data"), "{msg}");
        assert!(msg.contains("--url"), "{msg}");
        std::fs::create_dir_all(dir.path().join("run")).unwrap();
        std::fs::write(dir.path().join(HTTP_ADDR_FILE), "127.0.0.1:9191\n").unwrap();
        let s = Source::from_data_dir(dir.path()).unwrap();
        assert_eq!(s.url.to_string(), "http://127.0.0.1:9191/metrics");
        std::fs::write(dir.path().join(HTTP_ADDR_FILE), "garbage").unwrap();
        let msg = format!("{:#}", Source::from_data_dir(dir.path()).err().unwrap());
        assert!(msg.contains("not HOST:PORT"), "{msg}");
    }

    #[test]
    fn scrape_errors_name_the_url() {
        let (addr, h) = serve(vec![
            "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n".into(),
            "<html>hello</html>\n".into(),
            "weft_fs_ops_total{fs=\"fs0\",op=\"read\"} 7\n".into(),
        ]);
        let s = Source::from_url(&format!("http://{addr}")).unwrap();
        let url = s.url.to_string();
        let msg = format!("{:#}", s.scrape().err().unwrap());
        assert!(msg.contains(&url) && msg.contains("500"), "{msg}");
        let msg = format!("{:#}", s.scrape().err().unwrap());
        assert!(msg.contains(&url) && msg.contains("line 1"), "{msg}");
        let sample = s.scrape().unwrap();
        assert_eq!(
            sample.totals.fs["fs0"].ops["read"].count,
            exposition::Num::Int(7)
        );
        h.join().unwrap();
        // Nothing listens there any more.
        let msg = format!("{:#}", s.scrape().err().unwrap());
        assert!(
            msg.contains("connection refused") && msg.contains(&url),
            "{msg}"
        );
    }
}

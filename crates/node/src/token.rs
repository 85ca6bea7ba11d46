//! Join tokens: `WEFT1-<hex>` of the cluster id, the quorum nodes'
//! addresses, an expiry and a join key derived from the cluster secret (see
//! `Secret::join_key`). A token never holds the secret itself; a node
//! joining with it receives the secret sealed under the key.

use crate::error::{NodeError, Result};
use crate::invalid;
use serde::{Deserialize, Serialize};
use weft_net::Secret;
use weft_proto::msg::JoinClaim;

const PREFIX: &str = "WEFT1-";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Token {
    pub cluster_id: String,
    pub quorum_addrs: Vec<String>,
    pub claim: JoinClaim,
    pub key: [u8; 32],
}

pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Token {
    /// A token valid for `valid_secs` from now.
    pub fn new(
        secret: &Secret,
        cluster_id: &str,
        quorum_addrs: Vec<String>,
        valid_secs: u64,
    ) -> Token {
        let claim = JoinClaim {
            token_id: rand::random(),
            expires: now_secs() + valid_secs,
        };
        Token {
            cluster_id: cluster_id.to_string(),
            quorum_addrs,
            key: secret.join_key(&claim).bytes(),
            claim,
        }
    }

    pub fn encode(&self) -> String {
        let bytes = postcard::to_allocvec(self).unwrap_or_default();
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        format!("{PREFIX}{hex}")
    }

    pub fn decode(text: &str) -> Result<Token> {
        let what = "the join token is malformed: copy it whole from `weft cluster token` (it starts with WEFT1-)";
        let Some(hex) = text.trim().strip_prefix(PREFIX) else {
            invalid!("{what}");
        };
        if hex.len() % 2 != 0 || hex.len() > 8192 {
            invalid!("{what}");
        }
        let bytes = (0..hex.len() / 2)
            .map(|i| {
                hex.get(2 * i..2 * i + 2)
                    .and_then(|p| u8::from_str_radix(p, 16).ok())
            })
            .collect::<Option<Vec<u8>>>()
            .ok_or_else(|| NodeError::invalid(what))?;
        let t: Token = postcard::from_bytes(&bytes).map_err(|_| NodeError::invalid(what))?;
        if t.quorum_addrs.is_empty() {
            invalid!("{what}");
        }
        if t.claim.expires < now_secs() {
            invalid!(
                "the join token expired {} s ago: make a new one with `weft cluster token --data DIR` on a quorum node",
                now_secs() - t.claim.expires
            );
        }
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_refusals() {
        let s = Secret::generate();
        let t = Token::new(&s, "0123456789abcdef", vec!["10.0.0.1:1191".into()], 600);
        let text = t.encode();
        assert_eq!(Token::decode(&text).unwrap(), t);
        assert_eq!(s.join_key(&t.claim).bytes(), t.key);
        assert!(Token::decode("WEFT1-zz").is_err());
        assert!(Token::decode(&text[..text.len() - 2]).is_err());
        assert!(Token::decode("hello").is_err());
        let old = Token::new(&s, "0123456789abcdef", vec!["a:1".into()], 0);
        let mut old = old;
        old.claim.expires = 1;
        let e = Token::decode(&old.encode()).unwrap_err().to_string();
        assert!(e.contains("expired"), "{e}");
    }
}

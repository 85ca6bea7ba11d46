//! The cluster secret: 32 random bytes, stored hex-encoded in a 0600 file.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use weft_proto::msg::JoinClaim;

use crate::handshake::mac;
use crate::NetError;

#[derive(Clone)]
pub struct Secret(pub(crate) [u8; 32]);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Secret {
    pub fn generate() -> Self {
        Secret(rand::random())
    }

    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Secret(bytes)
    }

    /// The key a join token carries: derived from the cluster secret, the
    /// token's id and its expiry, so the secret itself never leaves the
    /// cluster's nodes in a token and an expired token proves nothing.
    pub fn join_key(&self, claim: &JoinClaim) -> Secret {
        Secret(mac(
            &self.0,
            &[b"weft-join", &claim.token_id, &claim.expires.to_le_bytes()],
        ))
    }

    /// The cluster secret sealed for a node that holds `key`: XOR with a pad
    /// derived from the key and a fresh nonce (used once).
    pub fn seal(&self, key: &Secret, nonce: &[u8; 32]) -> [u8; 32] {
        let pad = mac(&key.0, &[b"weft-seal", nonce]);
        let mut out = [0u8; 32];
        for (o, (s, p)) in out.iter_mut().zip(self.0.iter().zip(pad.iter())) {
            *o = s ^ p;
        }
        out
    }

    /// Opens what [`Secret::seal`] sealed.
    pub fn unseal(key: &Secret, nonce: &[u8; 32], sealed: &[u8; 32]) -> Secret {
        Secret(Secret(*sealed).seal(key, nonce))
    }

    /// The raw bytes, for a join token's key.
    pub fn bytes(&self) -> [u8; 32] {
        self.0
    }

    /// Writes the secret to a new file readable by its owner only.
    pub fn save(&self, path: &Path) -> Result<(), NetError> {
        let err = |reason: String| NetError::Secret {
            path: path.display().to_string(),
            reason,
        };
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| err(e.to_string()))?;
        let hex: String = self.0.iter().map(|b| format!("{b:02x}")).collect();
        f.write_all(format!("{hex}\n").as_bytes())
            .and_then(|_| f.sync_all())
            .map_err(|e| err(e.to_string()))
    }

    pub fn load(path: &Path) -> Result<Self, NetError> {
        let err = |reason: String| NetError::Secret {
            path: path.display().to_string(),
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        let hex = text.trim();
        if hex.len() != 64 {
            return Err(err(format!("expected 64 hex digits, found {}", hex.len())));
        }
        let mut out = [0u8; 32];
        for (i, byte) in out.iter_mut().enumerate() {
            let pair = hex
                .get(2 * i..2 * i + 2)
                .ok_or_else(|| err("not hex".into()))?;
            *byte = u8::from_str_radix(pair, 16).map_err(|_| err(format!("not hex: {pair:?}")))?;
        }
        Ok(Secret(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_secret_opens_only_with_the_join_key() {
        let s = Secret::generate();
        let claim = JoinClaim {
            token_id: [7; 16],
            expires: 99,
        };
        let key = s.join_key(&claim);
        let nonce = [3u8; 32];
        let sealed = s.seal(&key, &nonce);
        assert_ne!(sealed, s.0);
        assert_eq!(Secret::unseal(&key, &nonce, &sealed).0, s.0);
        let other = s.join_key(&JoinClaim {
            token_id: [7; 16],
            expires: 100,
        });
        assert_ne!(Secret::unseal(&other, &nonce, &sealed).0, s.0);
    }

    #[test]
    fn save_load_round_trip_and_mode() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s");
        let s = Secret::generate();
        s.save(&p).unwrap();
        assert_eq!(Secret::load(&p).unwrap().0, s.0);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert!(s.save(&p).is_err(), "never overwrites a secret");
        std::fs::write(&p, "zz").unwrap();
        assert!(Secret::load(&p).is_err());
    }
}

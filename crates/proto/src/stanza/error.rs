//! The errors of a stanza file: one [`StanzaError`] per bad line, with the
//! key as the user wrote it and what to write instead.

use std::fmt;

use super::StanzaType;
use StanzaErrorKind as K;

/// One problem in a stanza file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StanzaError {
    /// 1-based line of the offending key or stanza header; 0 for [`StanzaErrorKind::Empty`].
    pub line: usize,
    /// The key as the user wrote it, when the problem is about one key.
    pub key: Option<String>,
    pub kind: StanzaErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StanzaErrorKind {
    UnknownKey {
        stanza: StanzaType,
    },
    MissingValue,
    /// `why` reads after `key=value`, e.g. "is not a number".
    BadValue {
        value: String,
        why: String,
    },
    MissingDevice,
    MissingPoolName,
    DuplicateKey {
        first_line: usize,
    },
    DuplicateName {
        name: String,
        first_line: usize,
    },
    DuplicateDevice {
        device: String,
        first_line: usize,
    },
    DuplicatePool {
        pool: String,
        first_line: usize,
    },
    /// Text before the first stanza header.
    NotAStanza {
        text: String,
    },
    UnknownStanzaType {
        ty: String,
    },
    /// A `%` line that is not `%nsd:` or `%pool:` with its colon.
    BadHeader {
        text: String,
    },
    /// A token without `=` or with nothing before it.
    NotKeyValue {
        token: String,
    },
    /// The file has no `%nsd:` stanza.
    Empty,
}

impl std::error::Error for StanzaError {}

impl fmt::Display for StanzaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = self.key.as_deref().unwrap_or("");
        if self.kind != K::Empty {
            write!(f, "line {}: ", self.line)?;
        }
        let hint = hint(key);
        let d = "is already used by the stanza on line";
        match &self.kind {
            K::UnknownKey { stanza } => {
                let (ty, known) = (stanza.as_str(), stanza.keys().replace(' ', "=, "));
                write!(
                    f,
                    "unknown key {key:?} in a %{ty}: stanza: write one of {known}="
                )
            }
            K::MissingValue => write!(f, "{key} has no value: write {hint}"),
            K::BadValue { value, why } => write!(f, "{key}={value} {why}: write {hint}"),
            K::MissingDevice => write!(
                f,
                "this %nsd: stanza has no device: write device=/absolute/path"
            ),
            K::MissingPoolName => write!(f, "this %pool: stanza has no pool name: write pool=NAME"),
            K::DuplicateKey { first_line: l } => {
                write!(
                    f,
                    "{key} is given twice in one stanza (first on line {l}): keep only one"
                )
            }
            K::DuplicateName {
                name,
                first_line: l,
            } => {
                write!(
                    f,
                    "NSD name {name} {d} {l}: give every %nsd: stanza its own nsd=NAME"
                )
            }
            K::DuplicateDevice {
                device,
                first_line: l,
            } => {
                write!(
                    f,
                    "device {device} {d} {l}: give every NSD its own device=PATH"
                )
            }
            K::DuplicatePool {
                pool,
                first_line: l,
            } => {
                write!(f, "pool {pool} {d} {l}: keep one %pool: stanza per pool")
            }
            K::NotAStanza { text } => write!(
                f,
                "{text:?} comes before any stanza: start a stanza with %nsd: \
                 or make the line a comment with #"
            ),
            K::UnknownStanzaType { ty } => write!(
                f,
                "%{ty}: stanzas are not supported: Weft reads only %nsd: and %pool: stanzas; \
                 remove this stanza or comment it out with #"
            ),
            K::BadHeader { text } => write!(
                f,
                "{text:?} is not a stanza header: write %nsd: or %pool: (with the colon) \
                 followed by key=value pairs"
            ),
            K::NotKeyValue { token } => write!(
                f,
                "{token:?} is not a key=value pair: write key=value with no spaces around \"=\""
            ),
            K::Empty => write!(
                f,
                "the stanza file has no %nsd: stanza: describe each disk with a line such as \
                 %nsd: nsd=nsd1 device=/path servers=NODE"
            ),
        }
    }
}

/// All errors as one message, one line each, for the CLI to print.
pub fn render_errors(errors: &[StanzaError]) -> String {
    let n = errors.len();
    let s = if n == 1 { "" } else { "s" };
    let mut out = format!("{n} problem{s} in the stanza file:");
    for e in errors {
        out.push_str(&format!("\n  {e}"));
    }
    out
}

/// What to write instead, for the key as the user wrote it.
pub(super) fn hint(written: &str) -> String {
    let name_rule = "with 1 to 64 letters, digits, '_', '-' or '.', starting with a letter";
    let key = StanzaType::Nsd
        .key(written)
        .or_else(|| StanzaType::Pool.key(written));
    match key {
        Some("nsd") => format!("nsd=NAME {name_rule}"),
        Some("device") => "device=/absolute/path".into(),
        Some("servers") => "servers=NODE[,NODE...], the primary server first, none twice".into(),
        Some("usage") => "usage=dataAndMetadata, usage=dataOnly or usage=metadataOnly".into(),
        Some("failureGroup") => "failureGroup=N with N from 0 to 2147483647".into(),
        Some("pool") => format!("pool=NAME {name_rule}"),
        Some("thinDiskType") => "thinDiskType=no, nvme, scsi or auto".into(),
        Some("size") => "size=N in bytes or with a K, M, G, T or P suffix, e.g. size=200G".into(),
        Some("blockSize") => "blockSize=N, a power of two from 64K to 16M, e.g. 4M".into(),
        Some(k) => format!("{k}=VALUE"),
        None => "key=value".into(),
    }
}

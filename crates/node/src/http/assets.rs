//! The dashboard's files (`crates/node/assets/`), compiled into the binary
//! so a node serves them with nothing installed beside it.

macro_rules! asset {
    ($name:literal, $type:literal) => {
        (
            $name,
            $type,
            include_bytes!(concat!("../../assets/", $name)).as_slice(),
        )
    };
}

/// (file name, content type, bytes).
const ASSETS: &[(&str, &str, &[u8])] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("app.js", "text/javascript; charset=utf-8"),
    asset!("style.css", "text/css; charset=utf-8"),
    asset!("favicon.svg", "image/svg+xml"),
    asset!("uPlot.iife.min.js", "text/javascript; charset=utf-8"),
    asset!("uPlot.min.css", "text/css; charset=utf-8"),
    asset!("uPlot.LICENSE.txt", "text/plain; charset=utf-8"),
];

/// The content type and bytes of asset `name`.
pub fn get(name: &str) -> Option<(&'static str, &'static [u8])> {
    ASSETS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, t, b)| (*t, *b))
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_asset_is_there_and_nothing_else() {
        let (t, html) = super::get("index.html").unwrap();
        assert!(t.starts_with("text/html"));
        let html = String::from_utf8_lossy(html);
        for used in [
            "/assets/app.js",
            "/assets/uPlot.iife.min.js",
            "/assets/style.css",
        ] {
            assert!(html.contains(used), "index.html does not load {used}");
            assert!(super::get(used.trim_start_matches("/assets/")).is_some());
        }
        assert!(super::get("../Cargo.toml").is_none());
        assert!(super::get("").is_none());
    }
}

//! Opening NSDs: labels are checked, mistakes are typed errors naming the path.

use weft_nsd::{format_nsd, read_label, NsdError, NsdServer};
use weft_proto::config::FORMAT_VERSION;

use crate::common::*;

fn rewrite_label(dir: &std::path::Path, edit: impl Fn(&mut serde_json::Value)) {
    let path = dir.join("nsd.label");
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
}

#[test]
fn a_label_of_another_format_version_is_refused() {
    let e = env();
    let nsd1 = e.specs[1].clone();
    rewrite_label(&nsd1.path, |v| {
        v["format_version"] = (FORMAT_VERSION + 1).into()
    });
    let err = match NsdServer::open(e.specs.clone(), CLUSTER) {
        Err(err) => err,
        Ok(_) => panic!("opened an NSD of another format"),
    };
    match &err {
        NsdError::IncompatibleFormat {
            path,
            found,
            expected,
        } => {
            assert_eq!(path, &nsd1.path);
            assert_eq!(*found, FORMAT_VERSION + 1);
            assert_eq!(*expected, FORMAT_VERSION);
        }
        other => panic!("wrong error {other:?}"),
    }
    assert!(err.to_string().contains(&*nsd1.path.to_string_lossy()));
}

#[test]
fn another_cluster_or_nsd_id_is_refused() {
    let e = env();
    let err = NsdServer::open(e.specs.clone(), "other-cluster")
        .err()
        .unwrap();
    assert!(matches!(err, NsdError::WrongCluster { .. }), "{err}");
    assert!(err.to_string().contains("other-cluster"), "{err}");

    let mut swapped = e.specs.clone();
    let (a, b) = (swapped[0].path.clone(), swapped[1].path.clone());
    swapped[0].path = b;
    swapped[1].path = a;
    let err = NsdServer::open(swapped, CLUSTER).err().unwrap();
    assert!(matches!(err, NsdError::WrongNsd { .. }), "{err}");

    let mut dup = e.specs.clone();
    dup[1].id = dup[0].id;
    let err = NsdServer::open(dup, CLUSTER).err().unwrap();
    assert!(matches!(err, NsdError::DuplicateId { .. }), "{err}");

    let missing = spec(e.dir.path(), 9, 1 << 30, BS);
    let err = NsdServer::open(vec![missing], CLUSTER).err().unwrap();
    assert!(matches!(err, NsdError::NotFormatted { .. }), "{err}");
}

#[test]
fn format_refuses_used_directories() {
    let dir = tempfile::tempdir().unwrap();
    let s = spec(dir.path(), 1, 1 << 30, BS);
    format_nsd(&s, CLUSTER).unwrap();
    assert_eq!(read_label(&s.path).unwrap().id, 1);
    let err = format_nsd(&s, CLUSTER).unwrap_err();
    assert!(matches!(err, NsdError::AlreadyFormatted { .. }), "{err}");

    let s2 = spec(dir.path(), 2, 1 << 30, BS);
    std::fs::create_dir_all(s2.path.join("data")).unwrap();
    let err = format_nsd(&s2, CLUSTER).unwrap_err();
    assert!(matches!(err, NsdError::NotEmpty { .. }), "{err}");
    assert!(
        err.to_string().contains(&*s2.path.to_string_lossy()),
        "{err}"
    );
    assert!(s2.path.join("data").exists());

    let bad = weft_nsd::NsdSpec {
        block_size: 1000,
        ..spec(dir.path(), 3, 1 << 30, BS)
    };
    let err = format_nsd(&bad, CLUSTER).unwrap_err();
    assert!(
        matches!(
            err,
            NsdError::InvalidSpec {
                field: "block_size",
                ..
            }
        ),
        "{err}"
    );
}

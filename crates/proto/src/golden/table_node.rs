//! Golden entries of the requests to the node daemon (`NodeRequest`).

use crate::msg::NodeRequest;

use super::samples::*;
use super::Entry;

/// The node part of [`super::table`], in table order.
pub(super) fn entries() -> Vec<Entry> {
    vec![
        // Requests to the node daemon.
        (
            "NodeRequest::Mount",
            node(NodeRequest::Mount {
                fs: "fs1".into(),
                path: "/mnt/fs1".into(),
            }),
            "030003667331082f6d6e742f667331",
        ),
        (
            "NodeRequest::Umount",
            node(NodeRequest::Umount {
                path: "/mnt/fs1".into(),
            }),
            "0301082f6d6e742f667331",
        ),
        ("NodeRequest::Mounts", node(NodeRequest::Mounts), "0302"),
        (
            "NodeRequest::ProbeDevice",
            node(NodeRequest::ProbeDevice {
                path: "/srv/nsd1".into(),
                force: true,
            }),
            "0303092f7372762f6e73643101",
        ),
    ]
}

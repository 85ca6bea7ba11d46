//! Serves the configuration reads every node and client makes.

use std::sync::Arc;

use bytes::Bytes;
use weft_proto::{ErrorKind, RemoteError, Response};

use crate::ConfigStore;

pub struct QuorumServer {
    store: Arc<dyn ConfigStore>,
}

impl QuorumServer {
    pub fn new(store: Arc<dyn ConfigStore>) -> Self {
        QuorumServer { store }
    }

    pub fn store(&self) -> &Arc<dyn ConfigStore> {
        &self.store
    }

    /// The configuration this quorum node has applied.
    pub fn get_config(&self) -> (Response, Bytes) {
        match self.store.get() {
            Some(c) => (Response::Config(Box::new(c)), Bytes::new()),
            None => (
                Response::Error(RemoteError::new(
                    ErrorKind::NoQuorum,
                    "this quorum node holds no configuration yet",
                )),
                Bytes::new(),
            ),
        }
    }
}

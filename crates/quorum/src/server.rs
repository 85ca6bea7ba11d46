//! Serves configuration requests from clients and admin commands.

use std::sync::Arc;

use bytes::Bytes;
use weft_proto::msg::QuorumRequest;
use weft_proto::Response;

use crate::ConfigStore;

pub struct QuorumServer {
    store: Arc<dyn ConfigStore>,
}

impl QuorumServer {
    pub fn new(store: Arc<dyn ConfigStore>) -> Self {
        QuorumServer { store }
    }

    pub fn handle(&self, req: QuorumRequest, _data: Bytes) -> (Response, Bytes) {
        match req {
            QuorumRequest::GetConfig => {
                (Response::Config(Box::new(self.store.get())), Bytes::new())
            }
        }
    }
}

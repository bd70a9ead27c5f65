//! What the tools of one server share with it: the protocol peer they call, and the routes by
//! which the server's progress notifications reach the call that asked for them.

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::{Peer, RoleClient};
use runtime::ProgressSink;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Routes the server's progress notifications to the call that asked for them.
#[derive(Default)]
pub(crate) struct ProgressRoutes(Mutex<HashMap<ProgressToken, ProgressSink>>);

impl ProgressRoutes {
    pub(crate) fn add(&self, token: ProgressToken, sink: ProgressSink) {
        // A poisoned lock means a holder panicked between two map operations; the map is intact.
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(token, sink);
    }

    pub(crate) fn remove(&self, token: &ProgressToken) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(token);
    }

    pub(crate) fn route(&self, p: &ProgressNotificationParam) {
        let map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(sink) = map.get(&p.progress_token) {
            let total = p.total.map(|t| format!("/{t}")).unwrap_or_default();
            let message = p
                .message
                .as_deref()
                .map(|m| format!(" {m}"))
                .unwrap_or_default();
            sink.report(format!("{}{total}{message}", p.progress));
        }
    }
}

/// What the tools of one server share.
pub(crate) struct Link {
    pub(crate) server: String,
    pub(crate) pid: Option<u32>,
    pub(crate) peer: Peer<RoleClient>,
    pub(crate) routes: Arc<ProgressRoutes>,
    /// The sandbox the server runs under, journaled in each of its calls' `started`; `None`
    /// when it was started without one.
    pub(crate) bound: Option<runtime::event::SandboxBound>,
}

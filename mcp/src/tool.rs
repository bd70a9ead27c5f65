//! One tool of an MCP server, as a runtime [`Tool`]: the same pipeline, journal and recovery as
//! a built-in.
//!
//! The truth about a remote call: once the request is written to the server's stdin the server
//! may act on it, so the call *started* (the runtime journaled `started` before this body ran).
//! If the connection then closes, or the call is cancelled, nothing tells us whether the server
//! finished: MCP has no acknowledgement of `notifications/cancelled`, and a dead process answers
//! nothing. Both settle as `TOOL_OUTCOME_UNKNOWN`, never as a clean abort. Only an answer from
//! the server (a result, or a JSON-RPC error) is a known outcome.
//!
//! Every `tools/call` carries the call's idempotency key in its `_meta`
//! ([`IDEMPOTENCY_KEY_META`]): a server that deduplicates can tell a retry or a resume's re-run
//! from a new request.

use crate::link::Link;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
    ClientRequest, ContentBlock, RequestMetaObject, ServerResult,
};
use rmcp::service::{PeerRequestOptions, ServiceError};
use runtime::event::{Resources, ToolSource};
use runtime::Args;
use runtime::ErrorCode;
use runtime::Exposure;
use runtime::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
use serde_json::Value;
use std::sync::Arc;

/// Longest intent text a call declares (its arguments, for an outcome-unknown report).
const INTENT_BYTES_MAX: usize = 512;

/// One tool of an MCP server as a runtime [`Tool`]: a call is sent to the server as `tools/call`
/// and the server's answer becomes the call's result. Its name, description and schemas are the
/// server's (the name after prefixing); whether it is read-only and parallel-safe comes from the
/// configuration.
pub struct McpTool {
    link: Arc<Link>,
    name: String,
    remote_name: String,
    description: String,
    input_schema: Value,
    output_schema: Option<Value>,
    source: ToolSource,
    read_only: bool,
    parallel_safe: bool,
    timeout_ms: Option<u64>,
    exposure: Exposure,
}

impl McpTool {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        link: Arc<Link>,
        remote: &rmcp::model::Tool,
        name: String,
        source: ToolSource,
        read_only: bool,
        parallel_safe: bool,
        timeout_ms: Option<u64>,
        exposure: Exposure,
    ) -> McpTool {
        McpTool {
            link,
            name,
            remote_name: remote.name.to_string(),
            description: remote
                .description
                .as_deref()
                .or(remote.title.as_deref())
                .unwrap_or("")
                .to_owned(),
            input_schema: Value::Object(remote.input_schema.as_ref().clone()),
            output_schema: remote
                .output_schema
                .as_ref()
                .map(|s| Value::Object(s.as_ref().clone())),
            source,
            read_only,
            parallel_safe,
            timeout_ms,
            exposure,
        }
    }

    /// The tool's name on its server.
    pub fn remote_name(&self) -> &str {
        &self.remote_name
    }

    /// What the journal records as the tool's source (the server), as registered.
    pub fn source(&self) -> &ToolSource {
        &self.source
    }

    /// How the tool is shown to the model, per the configuration.
    pub fn exposure(&self) -> Exposure {
        self.exposure
    }

    fn unknown(&self, what: &str) -> ToolError {
        ToolError::new(
            ErrorCode::ToolOutcomeUnknown,
            format!(
                "{what}; MCP server {} had received the call, so whether {} took effect is unknown",
                self.link.server, self.remote_name
            ),
        )
    }

    async fn call(&self, args: Args, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let mut params = CallToolRequestParams::new(self.remote_name.clone());
        params.arguments = args.value().as_object().cloned();
        // The progress token is added beside it when the request is sent (rmcp merges the two).
        params.meta = Some(idempotency_meta(ctx.idempotency_key()));
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handle = match self
            .link
            .peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
        {
            Ok(handle) => handle,
            // Refused before it was written: the server never saw this call.
            Err(e) => {
                return Err(ToolError::new(
                    ErrorCode::ToolFailed,
                    format!(
                        "MCP server {} is not running ({e}); the call was not sent to it",
                        self.link.server
                    ),
                ))
            }
        };
        self.link
            .routes
            .add(handle.progress_token.clone(), ctx.progress().clone());
        let (id, token, mut answer) = (handle.id, handle.progress_token, handle.rx);
        let answered = tokio::select! {
            biased;
            answered = &mut answer => Some(answered),
            _ = ctx.cancel().cancelled() => None,
        };
        self.link.routes.remove(&token);
        let answered = match answered {
            Some(answered) => answered,
            None => {
                let sent = self
                    .link
                    .peer
                    .notify_cancelled(CancelledNotificationParam::new(
                        Some(id),
                        Some("the user stopped the batch or the call timed out".to_owned()),
                    ))
                    .await;
                let what = match sent {
                    Ok(()) => "cancelled: notifications/cancelled was sent and MCP servers do not \
                               confirm a cancellation"
                        .to_owned(),
                    Err(e) => format!("cancelled, and the cancellation could not be sent ({e})"),
                };
                return Err(self.unknown(&what));
            }
        };
        match answered {
            Ok(Ok(ServerResult::CallToolResult(result))) => self.output(result),
            Ok(Ok(other)) => Err(ToolError::new(
                ErrorCode::ToolFailed,
                format!(
                    "MCP server {} answered tools/call with something else: {}",
                    self.link.server,
                    serde_json::to_string(&other).unwrap_or_else(|e| e.to_string())
                ),
            )),
            // The server answered with a JSON-RPC error: it refused or failed, and said so.
            Ok(Err(ServiceError::McpError(e))) => Err(ToolError::new(
                ErrorCode::ToolFailed,
                format!(
                    "MCP server {} refused the call: {} ({})",
                    self.link.server, e.message, e.code.0
                ),
            )),
            Ok(Err(e)) => Err(self.unknown(&format!(
                "the connection to MCP server {} (pid {}) failed mid-call: {e}",
                self.link.server,
                pid(self.link.pid)
            ))),
            Err(_) => Err(self.unknown(&format!(
                "MCP server {} (pid {}) went away mid-call",
                self.link.server,
                pid(self.link.pid)
            ))),
        }
    }

    /// A `tools/call` result as the runtime's output: text blocks joined, other blocks named;
    /// `isError` turns it into a tool failure with that text.
    fn output(&self, result: CallToolResult) -> Result<ToolOutput, ToolError> {
        let text: Vec<String> = result.content.iter().map(block_text).collect();
        let text = text.join("\n");
        if result.is_error == Some(true) {
            return Err(ToolError::new(ErrorCode::ToolFailed, text));
        }
        let mut output = ToolOutput::text(text);
        output.value = result.structured_content;
        Ok(output)
    }
}

/// The `_meta` key under which every `tools/call` carries the call's idempotency key (the same
/// for every attempt of the call and after any resume), for servers that deduplicate.
pub(crate) const IDEMPOTENCY_KEY_META: &str = "io.tooljournal/idempotency-key";

/// A `tools/call` request's `_meta` naming the call's idempotency key.
fn idempotency_meta(key: &str) -> RequestMetaObject {
    let mut meta = RequestMetaObject::new();
    meta.insert(
        IDEMPOTENCY_KEY_META.to_owned(),
        Value::String(key.to_owned()),
    );
    meta
}

fn pid(pid: Option<u32>) -> String {
    pid.map_or_else(|| "unknown".to_owned(), |p| p.to_string())
}

/// A content block as text for the model: text as is, anything else as a short description.
fn block_text(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(t) => t.text.clone(),
        ContentBlock::Image(i) => format!("[image {}, {} bytes base64]", i.mime_type, i.data.len()),
        ContentBlock::Audio(a) => format!("[audio {}, {} bytes base64]", a.mime_type, a.data.len()),
        ContentBlock::Resource(r) => format!(
            "[resource {}]",
            serde_json::to_string(&r.resource).unwrap_or_default()
        ),
        ContentBlock::ResourceLink(l) => format!("[resource link {}]", l.uri),
        other => format!(
            "[content {}]",
            serde_json::to_string(other).unwrap_or_default()
        ),
    }
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    /// The server's sandbox, when it runs under one: what the call could touch.
    fn evidence<'a>(&'a self, _args: &'a runtime::Args) -> runtime::EvidenceFuture<'a> {
        let bound = self
            .link
            .bound
            .clone()
            .map(runtime::event::Evidence::Sandbox);
        Box::pin(std::future::ready(bound.into_iter().collect()))
    }
    /// MCP tools carry no version of their own: the server's stands for them.
    fn version(&self) -> &str {
        match &self.source {
            ToolSource::Mcp { version, .. } => version,
            _ => "unknown",
        }
    }
    fn input_schema(&self) -> Value {
        self.input_schema.clone()
    }
    fn output_schema(&self) -> Option<Value> {
        self.output_schema.clone()
    }
    fn is_concurrency_safe(&self, _args: &Args) -> bool {
        self.parallel_safe
    }
    fn is_read_only(&self) -> bool {
        self.read_only
    }
    fn timeout_ms(&self) -> Option<u64> {
        self.timeout_ms
    }
    fn resources(&self, args: &Args) -> Resources {
        let mut intent = format!(
            "mcp {} {} {}",
            self.link.server,
            self.remote_name,
            args.canonical()
        );
        if intent.len() > INTENT_BYTES_MAX {
            let mut end = INTENT_BYTES_MAX;
            while !intent.is_char_boundary(end) {
                end -= 1;
            }
            intent.truncate(end);
            intent.push('…');
        }
        Resources {
            intents: vec![intent],
            ..Resources::default()
        }
    }
    fn execute(&self, args: Args, ctx: ToolContext) -> ToolFuture<'_> {
        Box::pin(self.call(args, ctx))
    }
}

//! The listeners a session runs around each call, stage by stage (DESIGN.md §3).
//!
//! - [`PreExecute`]: an ordered chain; each listener allows, denies, asks, or passes to the next.
//!   The first decision wins; if none decides, the session's default applies.
//! - [`Guard`]: the monotonic last line. It can only deny; there is no way to return "allow",
//!   so nothing after it can turn a denial into an allow.
//! - [`Approver`]: answers `Ask` decisions (a person, a script). Only "allowed" continues.
//! - [`PostExecute`]: inspects or rewrites a settled result; it cannot undo a side effect.
//! - [`Observer`]: sees frozen results and progress. It only looks: its failures are isolated.

use crate::args::Args;
use crate::event::{AskAnswer, CallRef, Resources, ToolSource};
use crate::result::ToolResult;
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;

/// What listeners see of a call. Arguments are the frozen ones: there is no way to change them.
#[derive(Debug, Clone)]
pub struct CallInfo {
    pub call: CallRef,
    pub tool: String,
    pub source: ToolSource,
    /// The tool declares it only reads (plan mode lets only these run).
    pub read_only: bool,
    pub args: Args,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Deny {
        reason: String,
    },
    Ask {
        reason: String,
    },
    /// No opinion: the next listener decides.
    Pass,
}

pub trait PreExecute: Send + Sync {
    fn name(&self) -> &str;
    fn decide(&self, call: &CallInfo) -> Decision;
}

pub trait Guard: Send + Sync {
    fn name(&self) -> &str;
    /// `Some(reason)` denies the call. There is no allow.
    fn check(&self, call: &CallInfo) -> Option<String>;
}

pub type AskFuture<'a> = Pin<Box<dyn Future<Output = AskAnswer> + Send + 'a>>;

pub trait Approver: Send + Sync {
    fn ask(&self, call: CallInfo, question: String) -> AskFuture<'_>;
}

/// A settled result as post-execute listeners see it.
#[derive(Debug, Clone, PartialEq)]
pub struct Draft {
    pub content: String,
    pub value: Option<Value>,
    pub is_error: bool,
    pub resources: Resources,
}

#[derive(Debug, Clone, PartialEq)]
pub enum PostDecision {
    Accept,
    /// Replace what the model sees; the canonical value is kept.
    ReplaceContent(String),
    /// Replace the canonical value (checked against the output schema); the content becomes
    /// the value's JSON.
    ReplaceValue(Value),
    /// Turn the result into an error with this feedback. Side effects stay recorded.
    Block {
        feedback: String,
    },
}

pub trait PostExecute: Send + Sync {
    fn name(&self) -> &str;
    fn inspect(&self, call: &CallInfo, draft: &Draft) -> PostDecision;
}

pub trait Observer: Send + Sync {
    fn name(&self) -> &str;
    /// The frozen, committed result of every call (rejected ones too). An error (or a panic)
    /// is logged and changes nothing.
    fn on_result(&self, call: &CallRef, tool: &str, result: &ToolResult) -> Result<(), String>;
    /// Progress a running tool reported, before its result.
    fn on_progress(&self, _call: &CallRef, _tool: &str, _message: &str) -> Result<(), String> {
        Ok(())
    }
    /// A call's body is about to run (its `started` is durable).
    fn on_start(&self, _call: &CallRef, _tool: &str) -> Result<(), String> {
        Ok(())
    }
}

/// The listeners of a session, in order.
#[derive(Clone, Default)]
pub struct Hooks {
    pub pre_execute: Vec<std::sync::Arc<dyn PreExecute>>,
    pub guards: Vec<std::sync::Arc<dyn Guard>>,
    pub approver: Option<std::sync::Arc<dyn Approver>>,
    pub post_execute: Vec<std::sync::Arc<dyn PostExecute>>,
    pub observers: Vec<std::sync::Arc<dyn Observer>>,
}

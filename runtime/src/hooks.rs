//! The listeners a session runs around each call, stage by stage (DESIGN.md §3).
//!
//! - [`PreExecute`]: an ordered chain; each listener allows, denies, asks, or passes to the next.
//!   The first decision wins; if none decides, the session's default applies.
//! - [`Guard`]: the monotonic last line. It can only deny; there is no way to return "allow",
//!   so nothing after it can turn a denial into an allow.
//! - [`Approver`]: answers `Ask` decisions (a person, a script). Only "allowed" continues. It also
//!   answers the built-in `ask` tool's questions ([`Approver::question`]): an answer there is
//!   the call's result, never an approval of anything else.
//! - [`PostExecute`]: inspects or rewrites a settled result; it cannot undo a side effect.
//! - [`Observer`]: sees frozen results and progress. It only looks: its failures are isolated.

use crate::args::Args;
use crate::event::{Answer, AskAnswer, CallRef, Question, Resources, ToolSource};
use crate::result::ToolResult;
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;

/// What listeners see of a call. Arguments are the frozen ones: there is no way to change them.
#[derive(Debug, Clone)]
pub struct CallInfo {
    /// Which call.
    pub call: CallRef,
    /// The tool's final name.
    pub tool: String,
    /// Where the tool comes from: listeners may trust external tools less.
    pub source: ToolSource,
    /// The tool declares it only reads (plan mode lets only these run).
    pub read_only: bool,
    /// The parsed arguments, frozen: exactly what the tool body will get.
    pub args: Args,
    /// The person's answer, for a built-in `ask` call once it is answered (`ask/reply`);
    /// `None` for every other call. The `ask` body returns it.
    pub answer: Option<Answer>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
/// What a pre-execute listener says about a call.
pub enum Decision {
    /// The call may run (guards still apply). Journaled as `Approval::Listener`.
    Allow,
    /// The call is rejected `POLICY_DENIED`.
    Deny {
        /// Why; the model reads it after `denied by NAME: `.
        reason: String,
    },
    /// A person decides: the question goes to the [`Approver`], journaled as `ask/*` events; only
    /// an "allowed" answer lets the call run.
    Ask {
        /// Why approval is needed: the question the approver is shown.
        reason: String,
    },
    /// No opinion: the next listener decides.
    Pass,
}

/// A listener in the pre-execute chain: sees a parsed call before it runs and allows, denies, asks
/// or passes. A listener that panics denies (fail closed).
pub trait PreExecute: Send + Sync {
    /// The listener's name, for the journal (`Approval::Listener`) and denial messages.
    fn name(&self) -> &str;
    /// Decides about one call. Runs on the session's task: keep it quick and do not block.
    fn decide(&self, call: &CallInfo) -> Decision;
}

/// A last check after the pre-execute chain (and any question): it can only deny. A guard that
/// panics denies.
pub trait Guard: Send + Sync {
    /// The guard's name, for denial messages (`guard NAME: reason`).
    fn name(&self) -> &str;
    /// `Some(reason)` denies the call. There is no allow.
    fn check(&self, call: &CallInfo) -> Option<String>;
}

/// What [`Approver::ask`] returns: resolves to the answer.
pub type AskFuture<'a> = Pin<Box<dyn Future<Output = AskAnswer> + Send + 'a>>;

/// What [`Approver::question`] returns: resolves to what became of the question.
pub type QuestionFuture<'a> = Pin<Box<dyn Future<Output = QuestionOutcome> + Send + 'a>>;

/// What became of a structured question (the built-in `ask` tool's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuestionOutcome {
    /// The person answered; the session checks the answer against the question (an answer
    /// that does not fit is withdrawn, never taken).
    Answered(Answer),
    /// The person chose not to answer.
    Declined {
        /// Their reason, if they gave one.
        text: Option<String>,
    },
    /// Nobody answered in time.
    Expired,
    /// The question was withdrawn unanswered (the terminal went away, the person pressed
    /// Ctrl-C, the approver cannot show such questions).
    Withdrawn {
        /// Why, for the journal and the model.
        reason: String,
    },
}

/// Answers the questions of `Ask` decisions: a person at a terminal, a script, a UI.
pub trait Approver: Send + Sync {
    /// Asks about `call`; `question` says why approval is needed. Should resolve `Expired` when
    /// nobody answers in time; it may also be dropped unanswered when the batch is stopped (the
    /// question is then journaled as cancelled).
    fn ask(&self, call: CallInfo, question: String) -> AskFuture<'_>;

    /// Asks whether `call` may run outside the session's sandbox ([`crate::Tool::escalation`]);
    /// `question` names the command and says it will run unsandboxed. Only an explicit
    /// "allowed" from a person may approve it: an approver that answers by default (a script's
    /// default, an unattended policy) must not. The default denies (fail closed): an approver
    /// that puts questions to a person says so by overriding it.
    fn escalate(&self, _call: CallInfo, _question: String) -> AskFuture<'_> {
        Box::pin(std::future::ready(AskAnswer::Denied))
    }

    /// Puts the built-in `ask` tool's question to the person. The default withdraws it: an
    /// approver that only knows yes/no must not turn a question into a "yes".
    fn question(&self, _call: CallInfo, _question: Question) -> QuestionFuture<'_> {
        Box::pin(async {
            QuestionOutcome::Withdrawn {
                reason: "this approver answers only yes/no approvals".into(),
            }
        })
    }
}

/// A settled result as post-execute listeners see it.
#[derive(Debug, Clone, PartialEq)]
pub struct Draft {
    /// The tool's content, before `finalize_content` and before any cut for the model.
    pub content: String,
    /// The tool's structured value, if it returned one (already checked against the output schema).
    pub value: Option<Value>,
    /// Whether the result is an error. Listeners only run on successful results, so they see
    /// `false`.
    pub is_error: bool,
    /// What the call declared it would touch.
    pub resources: Resources,
}

#[derive(Debug, Clone, PartialEq)]
/// What a post-execute listener does with a settled result.
pub enum PostDecision {
    /// Leave it as it is.
    Accept,
    /// Replace what the model sees; the canonical value is kept.
    ReplaceContent(String),
    /// Replace the canonical value (checked against the output schema); the content becomes
    /// the value's JSON.
    ReplaceValue(Value),
    /// Turn the result into an error with this feedback. Side effects stay recorded.
    Block {
        /// Why, for the model: the result reads `POST_EXECUTE_BLOCKED: blocked by NAME: feedback`.
        feedback: String,
    },
}

/// A listener that inspects each successful settled result before it is frozen, in order; the first
/// `Block` stops the chain. A listener that panics blocks the result (fail closed: it may have been
/// the one to redact it).
pub trait PostExecute: Send + Sync {
    /// The listener's name, for messages.
    fn name(&self) -> &str;
    /// Inspects one result; `draft` reflects the replacements of earlier listeners.
    fn inspect(&self, call: &CallInfo, draft: &Draft) -> PostDecision;
}

/// Watches calls without a say in them: starts, progress, frozen results. Its errors and panics are
/// logged and change nothing.
pub trait Observer: Send + Sync {
    /// The observer's name, for the log.
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
    /// The pre-execute chain, in order; the first decision wins.
    pub pre_execute: Vec<std::sync::Arc<dyn PreExecute>>,
    /// Guards, all of which must let a call through.
    pub guards: Vec<std::sync::Arc<dyn Guard>>,
    /// Who answers `Ask` decisions; `None`: every question is cancelled and the call rejected.
    pub approver: Option<std::sync::Arc<dyn Approver>>,
    /// Post-execute listeners, in order.
    pub post_execute: Vec<std::sync::Arc<dyn PostExecute>>,
    /// Observers, each shown every start, progress report and result.
    pub observers: Vec<std::sync::Arc<dyn Observer>>,
}

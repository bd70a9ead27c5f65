//! The `ask` tool is a question for the user: only the user's "yes" lets it through. With the
//! default hooks (no approver), or behind a listener that allows everything, it is never
//! answered "yes" by anyone else.

mod common;

use common::*;
use journal::SimStorage;
use std::sync::Arc;
use tooljournal_runtime::event::{AskAnswer, Event, ToolSource};
use tooljournal_runtime::hooks::{Approver, AskFuture, CallInfo, Decision, Hooks, PreExecute};
use tooljournal_runtime::registry::Registry;
use tooljournal_runtime::tools::ask::Ask;
use tooljournal_runtime::{Config, ErrorCode};

fn registry_with_ask() -> Arc<Registry> {
    let mut r = Registry::new();
    r.register(Arc::new(Ask), ToolSource::BuiltIn).unwrap();
    Arc::new(r)
}

fn ask_call() -> tooljournal_runtime::event::ModelCall {
    call("q", "ask", r#"{"question":"delete prod?"}"#)
}

struct AllowAll;
impl PreExecute for AllowAll {
    fn name(&self) -> &str {
        "allow-all"
    }
    fn decide(&self, _call: &CallInfo) -> Decision {
        Decision::Allow
    }
}

struct Answer(AskAnswer);
impl Approver for Answer {
    fn ask(&self, _call: CallInfo, _question: String) -> AskFuture<'_> {
        let a = self.0;
        Box::pin(async move { a })
    }
}

fn ask_events(storage: &SimStorage) -> Vec<&'static str> {
    journal_events(storage)
        .into_iter()
        .filter(|e| {
            matches!(
                e,
                Event::AskPending { .. }
                    | Event::AskAnswered { .. }
                    | Event::AskCancelled { .. }
                    | Event::AskExpired { .. }
            )
        })
        .map(|e| e.kind())
        .collect()
}

#[tokio::test]
async fn with_the_default_hooks_an_ask_is_never_answered_yes() {
    let storage = SimStorage::new();
    // Config::default() allows calls no listener decided: the ask must not be one of them.
    let mut session = session_on(
        &storage,
        registry_with_ask(),
        Hooks::default(),
        Config::default(),
    );
    let results = one_step(&mut session, vec![ask_call()]).await;
    assert_eq!(results[0].code, Some(ErrorCode::PolicyDenied));
    assert!(
        !results[0].content.contains("answered yes"),
        "{}",
        results[0].content
    );
    assert_eq!(ask_events(&storage), ["ask/pending", "ask/cancelled"]);
}

#[tokio::test]
async fn no_listener_can_answer_an_ask_for_the_user() {
    for (answer, allowed) in [(AskAnswer::Denied, false), (AskAnswer::AllowedOnce, true)] {
        let storage = SimStorage::new();
        let hooks = Hooks {
            pre_execute: vec![Arc::new(AllowAll)],
            approver: Some(Arc::new(Answer(answer))),
            ..Hooks::default()
        };
        let mut session = session_on(&storage, registry_with_ask(), hooks, Config::default());
        let results = one_step(&mut session, vec![ask_call()]).await;
        assert_eq!(
            results[0].code.is_none(),
            allowed,
            "{answer:?}: {:?}",
            results[0]
        );
        assert_eq!(
            ask_events(&storage),
            ["ask/pending", "ask/answered"],
            "{answer:?}: the user was asked, whatever the listener said"
        );
    }
}

//! The structural rules replay enforces, each with the identifier docs/FORMAT.md's table
//! (*Structural rules*) gives it: an event that decodes but breaks one is an inconsistent
//! journal, refused at that record ([`super::ReplayError::Inconsistent`] names the rule).
//!
//! Why identifiers: the document and the code are two lists of the same rules; a test holds
//! [`Rule::ALL`] equal to the document's table, so a rule added here without the document (or
//! the other way round) fails it.

macro_rules! rules {
    ($($(#[doc = $doc:literal])* $name:ident = $id:literal,)*) => {
        /// One structural rule of the journal (docs/FORMAT.md, *Structural rules*).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Rule {
            $($(#[doc = $doc])* $name,)*
        }

        impl Rule {
            /// Every rule, in the document's order.
            pub const ALL: &'static [Rule] = &[$(Rule::$name,)*];

            /// The rule's identifier, as the document's table spells it.
            pub fn id(self) -> &'static str {
                match self {
                    $(Rule::$name => $id,)*
                }
            }
        }
    };
}

rules! {
    /// The first record is `session/open`.
    FirstIsSessionOpen = "first-is-session-open",
    /// No second `session/open`.
    OneSessionOpen = "one-session-open",
    /// Nothing follows `session/close` but `session/reopen`.
    NothingAfterClose = "nothing-after-close",
    /// `session/reopen` only right after `session/close`.
    ReopenAfterClose = "reopen-after-close",
    /// No `session/close` while a turn is open.
    CloseWithNoOpenTurn = "close-with-no-open-turn",
    /// No `turn/start` while a turn is open.
    TurnStartWithNoOpenTurn = "turn-start-with-no-open-turn",
    /// Turns are numbered 1, 2, ... in order.
    TurnNumberedNext = "turn-numbered-next",
    /// An event naming a turn names the open one.
    NamesOpenTurn = "names-open-turn",
    /// No `turn/end` while a step is open.
    TurnEndWithNoOpenStep = "turn-end-with-no-open-step",
    /// No `step/start` while a step is open.
    StepStartWithNoOpenStep = "step-start-with-no-open-step",
    /// Steps are numbered 1, 2, ... in their turn.
    StepNumberedNext = "step-numbered-next",
    /// An event naming a step names the open step of the open turn.
    NamesOpenStep = "names-open-step",
    /// `step/tools` once per step, before its `llm/response`.
    StepToolsOnce = "step-tools-once",
    /// One `llm/response` per step.
    OneResponse = "one-response",
    /// No `llm/response` for an attempt that failed.
    ResponseOfLiveAttempt = "response-of-live-attempt",
    /// `llm/request` only before the step's `llm/response`.
    RequestBeforeResponse = "request-before-response",
    /// A step's attempts are numbered 1, 2, ... in order.
    AttemptNumberedNext = "attempt-numbered-next",
    /// `llm/attempt-failed` only before the step's `llm/response`.
    FailureBeforeResponse = "failure-before-response",
    /// `llm/attempt-failed` names the step's last attempt.
    FailureOfLastAttempt = "failure-of-last-attempt",
    /// An attempt fails once.
    AttemptFailsOnce = "attempt-fails-once",
    /// `llm/response-detail` once, right after the response, for its last attempt.
    DetailAfterResponse = "detail-after-response",
    /// `llm/refusal` once, after a response that stopped as `refusal`, before its calls.
    RefusalAfterRefusedResponse = "refusal-after-refused-response",
    /// `llm/note` after the response, before its calls, for its last attempt.
    NoteAfterResponse = "note-after-response",
    /// `context/summary-requested` before the step's `llm/response`.
    SummaryBeforeResponse = "summary-before-response",
    /// A summary covers earlier turns: 1 to a turn before its own.
    SummaryOfEarlierTurns = "summary-of-earlier-turns",
    /// `context/compacted` before the step's `llm/response`.
    ReductionBeforeResponse = "reduction-before-response",
    /// `context/compacted` before the step's first request or after its last attempt failed.
    ReductionBetweenAttempts = "reduction-between-attempts",
    /// A reduction keeps its own turn and shortens only kept steps before its own.
    ReductionKeepsItsTurn = "reduction-keeps-its-turn",
    /// `context/calibrated` right after its attempt failed as `context_overflow`.
    CalibrationAfterOverflow = "calibration-after-overflow",
    /// `context/calibrated` counts something.
    CalibrationCounts = "calibration-counts",
    /// `received` only after the step's `llm/response`.
    ReceivedAfterResponse = "received-after-response",
    /// `received` is the response's call at its index, the next one in the step.
    ReceivedMatchesResponse = "received-matches-response",
    /// `received` points back at earlier records.
    ReceivedPointsBack = "received-points-back",
    /// An event of a call names a call that was received.
    CallWasReceived = "call-was-received",
    /// A call's event points back at the call's latest event, and only at earlier records.
    CallPointsBack = "call-points-back",
    /// A call's events follow its state machine.
    CallStateMachine = "call-state-machine",
    /// `started` carries the key its session and call give.
    StartedKey = "started-key",
    /// Evidence hashes are sha256 as 64 lowercase hex digits.
    EvidenceSha256 = "evidence-sha256",
    /// `call/process` only while the call is `started`.
    ProcessWhileStarted = "process-while-started",
    /// `approved` fits the call's question and its answer.
    ApprovalFitsQuestion = "approval-fits-question",
    /// A question only while the call is `parsed` with no other question pending.
    QuestionWhileParsed = "question-while-parsed",
    /// `ask/reply` ends a pending `ask/question`.
    ReplyToPendingQuestion = "reply-to-pending-question",
    /// `ask/answered` holds a yes/no answer and ends an approval's question.
    YesNoAnswerToApproval = "yes-no-answer-to-approval",
    /// An answer, `ask/expired` or `ask/cancelled` ends a pending question.
    AnswerEndsPendingQuestion = "answer-ends-pending-question",
    /// A `recovery` names calls not committed.
    RecoveryOfUncommitted = "recovery-of-uncommitted",
    /// A call a `recovery` names unreceived is in the open step's `llm/response`.
    RecoveryOfAnsweredCall = "recovery-of-answered-call",
    /// `recovery/rerun` right after a `recovery`.
    RerunAfterRecovery = "rerun-after-recovery",
    /// `recovery/rerun` names calls of the open step it may run again, each once.
    RerunOfOpenCalls = "rerun-of-open-calls",
    /// `import/source` once, right after `session/open`.
    ImportSourceAfterOpen = "import-source-after-open",
    /// `import/line` and `import/outcome` only in an imported journal.
    ImportEventsImported = "import-events-imported",
}

/// A rule broken, and how.
pub(super) type Broken = (Rule, String);

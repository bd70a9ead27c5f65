//! The transcript format (DESIGN.md §10): JSON lines, a user line opening each turn and an
//! assistant line per step, with the scripted user's stop and answers. Read line by line, each
//! line bounded while it is read.
//!
//! An assistant line may carry, by call id, `"approvals"` (yes/no answers to the approvals a
//! listener asks for: `"allow"`, `"deny"` or `"expire"`) and `"answers"` (answers to the
//! questions of that line's `ask` calls: `{"choice": ["label", ...], "text": "..."}`, either
//! or both, or `"decline"`, `"expire"` or `"withdraw"`). Whether an answer fits its question is
//! the session's to judge when it is given, as for any approver's. Transcripts written before
//! `answers` existed answered an `ask` in `approvals`: there `"deny"` still means the person
//! declined and `"expire"` that nobody answered; `"allow"` is refused, because a yes is no
//! answer to a question.

use crate::event::{Answer, AskAnswer, ModelCall, ModelResponse, StopReason};
use crate::hooks::QuestionOutcome;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::io::{BufRead, Read};

/// Most lines a transcript may have.
pub(crate) const SCRIPT_LINES_MAX: usize = 100_000;
/// Longest transcript line, in bytes (its newline not counted). [`read_script`] refuses a longer
/// one while reading it: it never holds more than this (plus one byte) of a line.
pub(crate) const SCRIPT_LINE_BYTES_MAX: usize = 16 << 20;

/// One transcript line, with its line number (from 1) for messages.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptLine {
    /// The line number in the transcript, from 1.
    pub line: usize,
    /// What the line says happens.
    pub step: ModelStep,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLine {
    user: Option<String>,
    assistant: Option<RawAssistant>,
    cancel_after_ms: Option<u64>,
    approvals: Option<BTreeMap<String, RawApproval>>,
    answers: Option<BTreeMap<String, serde_json::Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAssistant {
    #[serde(default)]
    text: String,
    #[serde(default)]
    tool_calls: Vec<RawCall>,
    stop_reason: Option<StopReason>,
    cancel_after_ms: Option<u64>,
    approvals: Option<BTreeMap<String, RawApproval>>,
    answers: Option<BTreeMap<String, serde_json::Value>>,
}

/// An answer given as an object: the chosen labels and/or the person's words.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGiven {
    choice: Option<Vec<String>>,
    text: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCall {
    id: String,
    name: String,
    #[serde(default)]
    arguments: String,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum RawApproval {
    Allow,
    Deny,
    Expire,
}

impl From<RawApproval> for AskAnswer {
    fn from(a: RawApproval) -> AskAnswer {
        match a {
            RawApproval::Allow => AskAnswer::AllowedOnce,
            RawApproval::Deny => AskAnswer::Denied,
            RawApproval::Expire => AskAnswer::Expired,
        }
    }
}

/// The reason the journal and the model get for a question the transcript withdraws.
pub(crate) const WITHDRAWN_BY_TRANSCRIPT: &str = "withdrawn by the transcript";

/// What an approval given to an `ask` call means for its question: a denial is a decline and
/// an expiry an expiry (transcripts from before `answers`); an allow answers nothing (`None`).
pub(crate) fn question_outcome_of(approval: AskAnswer) -> Option<QuestionOutcome> {
    match approval {
        AskAnswer::Denied => Some(QuestionOutcome::Declined { text: None }),
        AskAnswer::Expired => Some(QuestionOutcome::Expired),
        AskAnswer::Cancelled => Some(QuestionOutcome::Withdrawn {
            reason: WITHDRAWN_BY_TRANSCRIPT.to_owned(),
        }),
        AskAnswer::AllowedOnce
        | AskAnswer::AllowedAlways
        | AskAnswer::Answered
        | AskAnswer::Declined => None,
    }
}

/// One entry of `answers`; `at` is `source:line` for errors.
fn answer_of(call_id: &str, value: serde_json::Value, at: &str) -> Result<QuestionOutcome, String> {
    use serde_json::Value;
    let wrong = || {
        format!(
            "{at}: the answer to call {call_id} is not an answer: give {{\"choice\": [labels], \
             \"text\": \"...\"}} (either or both), \"decline\", \"expire\" or \"withdraw\""
        )
    };
    match value {
        Value::String(word) => match word.as_str() {
            "decline" => Ok(QuestionOutcome::Declined { text: None }),
            "expire" => Ok(QuestionOutcome::Expired),
            "withdraw" => Ok(QuestionOutcome::Withdrawn {
                reason: WITHDRAWN_BY_TRANSCRIPT.to_owned(),
            }),
            _ => Err(wrong()),
        },
        value @ Value::Object(_) => {
            let given: RawGiven = serde_json::from_value(value)
                .map_err(|e| format!("{at}: the answer to call {call_id}: {e}"))?;
            if given.choice.is_none() && given.text.is_none() {
                return Err(wrong());
            }
            Ok(QuestionOutcome::Answered(Answer {
                choice: given.choice.unwrap_or_default(),
                text: given.text,
            }))
        }
        _ => Err(wrong()),
    }
}

/// A line's yes/no approvals and its questions' answers, by call id.
type ApprovalsAndAnswers = (
    BTreeMap<String, AskAnswer>,
    BTreeMap<String, QuestionOutcome>,
);

/// A line's approvals and answers, checked against its calls: every answer is for one of the
/// line's `ask` calls, and an approval given to an `ask` call becomes its answer (see the
/// module's documentation).
fn approvals_and_answers(
    calls: &[RawCall],
    approvals: BTreeMap<String, RawApproval>,
    answers: BTreeMap<String, serde_json::Value>,
    at: &str,
) -> Result<ApprovalsAndAnswers, String> {
    let is_ask = |id: &str| {
        calls
            .iter()
            .any(|c| c.id == id && c.name == crate::session::ASK_TOOL)
    };
    let mut outcomes = BTreeMap::new();
    for (id, value) in answers {
        if !calls.iter().any(|c| c.id == id) {
            return Err(format!(
                "{at}: answers names call {id}, which is not a call on this line"
            ));
        }
        if !is_ask(&id) {
            return Err(format!(
                "{at}: answers names call {id}, which is not an `ask`: answer its approval in \
                 approvals"
            ));
        }
        let outcome = answer_of(&id, value, at)?;
        outcomes.insert(id, outcome);
    }
    let mut yes_no = BTreeMap::new();
    for (id, approval) in approvals {
        let approval = AskAnswer::from(approval);
        if !is_ask(&id) {
            yes_no.insert(id, approval);
            continue;
        }
        if outcomes.contains_key(&id) {
            return Err(format!(
                "{at}: call {id} is an ask with both an approval and an answer: give only its \
                 answer, in answers"
            ));
        }
        let outcome = question_outcome_of(approval)
            .ok_or_else(|| format!("{at}: call {id} is an ask: give its answer in answers"))?;
        outcomes.insert(id, outcome);
    }
    Ok((yes_no, outcomes))
}

/// Parses a transcript already in memory. Errors name the source, the line and what is wrong.
pub fn parse_script(text: &str, source: &str) -> Result<Vec<ScriptLine>, String> {
    read_script(text.as_bytes(), source)
}

/// Reads and parses a transcript line by line, holding one line at a time: a line longer than
/// `SCRIPT_LINE_BYTES_MAX` is refused as soon as that many bytes of it are read, so a huge
/// line costs no more memory than the limit. Errors name the source, the line and what is
/// wrong.
pub fn read_script(mut reader: impl BufRead, source: &str) -> Result<Vec<ScriptLine>, String> {
    let mut out = Vec::new();
    let mut raw = Vec::new();
    let mut line = 0;
    loop {
        line += 1;
        raw.clear();
        let limit = SCRIPT_LINE_BYTES_MAX as u64 + 1;
        (&mut reader)
            .take(limit)
            .read_until(b'\n', &mut raw)
            .map_err(|e| format!("{source}:{line}: cannot read the script: {e}"))?;
        if raw.is_empty() {
            break;
        }
        if raw.last() == Some(&b'\n') {
            raw.pop();
            if raw.last() == Some(&b'\r') {
                raw.pop();
            }
        } else if raw.len() as u64 == limit {
            return Err(format!(
                "{source}:{line}: the line is longer than {SCRIPT_LINE_BYTES_MAX} bytes \
                 (the limit of a transcript line); refused"
            ));
        }
        let text = std::str::from_utf8(&raw)
            .map_err(|e| format!("{source}:{line}: not UTF-8 text: {e}"))?;
        if text.trim().is_empty() {
            continue;
        }
        if out.len() >= SCRIPT_LINES_MAX {
            return Err(format!(
                "{source}:{line}: more than {SCRIPT_LINES_MAX} lines"
            ));
        }
        let step = parse_line(text, line, source)?;
        out.push(ScriptLine { line, step });
    }
    Ok(out)
}

/// One non-blank transcript line.
fn parse_line(raw: &str, line: usize, source: &str) -> Result<ModelStep, String> {
    let parsed: RawLine = serde_json::from_str(raw).map_err(|e| format!("{source}:{line}: {e}"))?;
    let step = match (parsed.user, parsed.assistant) {
        (Some(text), None) => {
            if parsed.cancel_after_ms.is_some()
                || parsed.approvals.is_some()
                || parsed.answers.is_some()
            {
                return Err(format!(
                    "{source}:{line}: cancel_after_ms, approvals and answers belong on an \
                     assistant line"
                ));
            }
            ModelStep::User { text }
        }
        (None, Some(a)) => {
            let stop_reason = a.stop_reason.unwrap_or(if a.tool_calls.is_empty() {
                StopReason::EndTurn
            } else {
                StopReason::ToolUse
            });
            let (approvals, answers) = approvals_and_answers(
                &a.tool_calls,
                a.approvals.or(parsed.approvals).unwrap_or_default(),
                a.answers.or(parsed.answers).unwrap_or_default(),
                &format!("{source}:{line}"),
            )?;
            ModelStep::Respond(Respond {
                response: ModelResponse {
                    text: a.text,
                    tool_calls: a
                        .tool_calls
                        .into_iter()
                        .map(|c| ModelCall {
                            call_id: c.id,
                            name: c.name,
                            arguments: c.arguments,
                        })
                        .collect(),
                    stop_reason,
                },
                cancel_after_ms: a.cancel_after_ms.or(parsed.cancel_after_ms),
                approvals,
                answers,
            })
        }
        _ => {
            return Err(format!(
                "{source}:{line}: a line has exactly one of \"user\" or \"assistant\""
            ))
        }
    };
    Ok(step)
}

/// The next thing that happens.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelStep {
    /// The user says something: a new turn.
    User {
        /// The user's message, journaled in `turn/start`.
        text: String,
    },
    /// The model answers in the open turn.
    Respond(Respond),
}

/// A model response, with what the (scripted) user does meanwhile.
#[derive(Debug, Clone, PartialEq)]
pub struct Respond {
    /// The assistant message, tool calls included.
    pub response: ModelResponse,
    /// The user presses stop this long after the batch starts.
    pub cancel_after_ms: Option<u64>,
    /// Yes/no answers to the approvals listeners ask for, by call id.
    pub approvals: BTreeMap<String, AskAnswer>,
    /// What becomes of the questions of the line's `ask` calls, by call id (an `ask` call not
    /// here is withdrawn unanswered).
    pub answers: BTreeMap<String, QuestionOutcome>,
}

/// Plays a transcript.
#[derive(Debug, Clone)]
pub struct ScriptedModel {
    lines: Vec<ScriptLine>,
    position: usize,
}

impl ScriptedModel {
    /// A model that plays `lines` from the first.
    pub fn new(lines: Vec<ScriptLine>) -> ScriptedModel {
        ScriptedModel { lines, position: 0 }
    }

    /// Starts after the first `consumed` lines (a resumed session).
    pub fn skip(&mut self, consumed: usize) {
        self.position = consumed.min(self.lines.len());
    }

    /// Every line of the transcript, played or not.
    pub fn lines(&self) -> &[ScriptLine] {
        &self.lines
    }

    /// The line to play next, if any.
    pub(super) fn line_at_position(&self) -> Option<&ScriptLine> {
        self.lines.get(self.position)
    }

    /// Moves past the line to play next.
    pub(super) fn advance(&mut self) {
        self.position += 1;
    }

    /// Lines played so far.
    pub fn position(&self) -> usize {
        self.position
    }

    /// Skips assistant lines up to the next user line (the rest of a stopped turn). Returns how
    /// many were skipped.
    pub fn skip_to_next_user(&mut self) -> usize {
        let start = self.position;
        while matches!(self.lines.get(self.position), Some(l) if matches!(l.step, ModelStep::Respond(_)))
        {
            self.position += 1;
        }
        self.position - start
    }
}

impl ScriptedModel {
    /// The next line's step, or `None` at the end of the transcript.
    pub fn next_step(&mut self) -> Option<ModelStep> {
        let line = self.lines.get(self.position)?;
        self.position += 1;
        Some(line.step.clone())
    }
}

/// How many transcript lines a journal has already consumed: each turn a user line, each step
/// with a model response an assistant line, and a stopped turn the rest of its responses. Errs
/// if the journal and the transcript disagree (a resume with the wrong script).
pub fn consumed_lines(
    lines: &[ScriptLine],
    replay: &crate::replay::SessionReplay,
) -> Result<usize, String> {
    let mut pos = 0;
    let at = |pos: usize| {
        lines
            .get(pos)
            .map(|l| format!("line {}", l.line))
            .unwrap_or_else(|| "the end of the script".to_owned())
    };
    for turn in &replay.turns {
        match lines.get(pos).map(|l| &l.step) {
            Some(ModelStep::User { text }) if *text == turn.user_text => pos += 1,
            _ => {
                return Err(format!(
                    "the journal's turn {} ({:?}) does not match the script at {}",
                    turn.turn,
                    turn.user_text,
                    at(pos)
                ))
            }
        }
        for step in &turn.steps {
            let Some(response) = &step.response else {
                continue;
            };
            match lines.get(pos).map(|l| &l.step) {
                Some(ModelStep::Respond(r)) if r.response == *response => pos += 1,
                _ => {
                    return Err(format!(
                        "the journal's turn {} step {} does not match the script at {}",
                        turn.turn,
                        step.step,
                        at(pos)
                    ))
                }
            }
        }
        // A stopped or interrupted turn's remaining responses were never played: skip them.
        // An open turn is one a resume is about to recover (and interrupt) itself.
        if matches!(
            turn.outcome,
            None | Some(
                crate::event::TurnOutcome::Cancelled | crate::event::TurnOutcome::Interrupted
            )
        ) {
            while matches!(lines.get(pos).map(|l| &l.step), Some(ModelStep::Respond(_))) {
                pos += 1;
            }
        }
    }
    Ok(pos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_design_format_and_names_bad_lines() {
        let text = concat!(
            "{\"user\": \"hi\"}\n",
            "\n",
            "{\"assistant\": {\"text\": \"t\", \"tool_calls\": [{\"id\": \"call_1\", \"name\": \"read\", \"arguments\": \"{\\\"path\\\":\\\"a\\\"}\"}], \"stop_reason\": \"tool_use\", \"cancel_after_ms\": 5, \"approvals\": {\"call_1\": \"expire\"}}}\n",
            "{\"assistant\": {\"text\": \"done\"}}\n",
        );
        let lines = parse_script(text, "t.jsonl").unwrap();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[1].line, 3);
        let ModelStep::Respond(r) = &lines[1].step else {
            panic!()
        };
        assert_eq!(r.response.tool_calls[0].arguments, "{\"path\":\"a\"}");
        assert_eq!(r.cancel_after_ms, Some(5));
        assert_eq!(r.approvals["call_1"], AskAnswer::Expired);
        let ModelStep::Respond(r) = &lines[2].step else {
            panic!()
        };
        assert_eq!(r.response.stop_reason, StopReason::EndTurn);

        let err = parse_script("{\"user\": \"a\"}\n{\"asistant\": {}}\n", "t.jsonl").unwrap_err();
        assert!(
            err.starts_with("t.jsonl:2: unknown field `asistant`"),
            "{err}"
        );
        let err = parse_script("{\"assistant\": {\"stop_reason\": \"maybe\"}}", "s").unwrap_err();
        assert!(err.starts_with("s:1:") && err.contains("maybe"), "{err}");
    }

    /// The assistant line of one `ask` call `q1` and one `read` call `r1`, with `extra`
    /// (JSON members) beside the calls.
    fn ask_line(extra: &str) -> String {
        format!(
            "{{\"user\": \"u\"}}\n{{\"assistant\": {{\"tool_calls\": [\
             {{\"id\": \"q1\", \"name\": \"ask\", \"arguments\": \"{{}}\"}}, \
             {{\"id\": \"r1\", \"name\": \"read\", \"arguments\": \"{{}}\"}}]{extra}}}}}\n"
        )
    }

    fn respond(text: &str) -> Respond {
        let lines = parse_script(text, "t.jsonl").unwrap();
        let ModelStep::Respond(r) = &lines[1].step else {
            panic!("line 2 is an assistant line")
        };
        r.clone()
    }

    #[test]
    fn answers_are_read_as_choices_text_or_one_of_three_words() {
        let r = respond(&ask_line(
            r#", "answers": {"q1": {"choice": ["a", "b"], "text": "and c"}}"#,
        ));
        let given = Answer {
            choice: vec!["a".into(), "b".into()],
            text: Some("and c".into()),
        };
        assert_eq!(r.answers["q1"], QuestionOutcome::Answered(given));
        assert!(r.approvals.is_empty());
        let r = respond(&ask_line(r#", "answers": {"q1": {"text": "mine"}}"#));
        let words = Answer {
            choice: vec![],
            text: Some("mine".into()),
        };
        assert_eq!(r.answers["q1"], QuestionOutcome::Answered(words));
        for (word, outcome) in [
            ("decline", QuestionOutcome::Declined { text: None }),
            ("expire", QuestionOutcome::Expired),
            (
                "withdraw",
                QuestionOutcome::Withdrawn {
                    reason: WITHDRAWN_BY_TRANSCRIPT.into(),
                },
            ),
        ] {
            let r = respond(&ask_line(&format!(r#", "answers": {{"q1": "{word}"}}"#)));
            assert_eq!(r.answers["q1"], outcome, "{word}");
        }
    }

    #[test]
    fn an_old_transcript_answers_an_ask_in_approvals_deny_declining_and_expire_expiring() {
        let r = respond(&ask_line(r#", "approvals": {"q1": "deny", "r1": "allow"}"#));
        assert_eq!(
            r.answers["q1"],
            QuestionOutcome::Declined { text: None },
            "a denied ask is a declined question"
        );
        assert_eq!(
            r.approvals.get("q1"),
            None,
            "and no approval for the question"
        );
        assert_eq!(r.approvals["r1"], AskAnswer::AllowedOnce);
        let r = respond(&ask_line(r#", "approvals": {"q1": "expire"}"#));
        assert_eq!(r.answers["q1"], QuestionOutcome::Expired);
    }

    #[test]
    fn answers_that_cannot_be_meant_are_refused_naming_the_line_and_the_call() {
        let cases = [
            (
                r#", "approvals": {"q1": "allow"}"#,
                "t.jsonl:2: call q1 is an ask: give its answer in answers",
            ),
            (
                r#", "answers": {"r1": {"text": "x"}}"#,
                "t.jsonl:2: answers names call r1, which is not an `ask`",
            ),
            (
                r#", "answers": {"q9": "decline"}"#,
                "t.jsonl:2: answers names call q9, which is not a call on this line",
            ),
            (
                r#", "answers": {"q1": "yes"}"#,
                "t.jsonl:2: the answer to call q1 is not an answer",
            ),
            (
                r#", "answers": {"q1": {}}"#,
                "t.jsonl:2: the answer to call q1 is not an answer",
            ),
            (
                r#", "answers": {"q1": ["a"]}"#,
                "t.jsonl:2: the answer to call q1 is not an answer",
            ),
            (
                r#", "answers": {"q1": {"choice": "a"}}"#,
                "t.jsonl:2: the answer to call q1: invalid type",
            ),
            (
                r#", "answers": {"q1": {"chioce": ["a"]}}"#,
                "t.jsonl:2: the answer to call q1: unknown field `chioce`",
            ),
            (
                r#", "answers": {"q1": "decline"}, "approvals": {"q1": "deny"}"#,
                "t.jsonl:2: call q1 is an ask with both an approval and an answer",
            ),
        ];
        for (extra, wanted) in cases {
            let err = parse_script(&ask_line(extra), "t.jsonl").unwrap_err();
            assert!(err.starts_with(wanted), "{extra}: {err}");
        }
        let err = parse_script("{\"user\": \"u\", \"answers\": {}}\n", "t.jsonl").unwrap_err();
        assert!(err.contains("belong on an assistant line"), "{err}");
    }

    #[test]
    fn a_line_of_the_limit_is_read_and_one_byte_more_is_refused_with_its_number() {
        let frame = "{\"user\": \"\"}".len();
        let line = |bytes: usize| format!("{{\"user\": \"{}\"}}", "a".repeat(bytes - frame));
        let at_limit = format!("{{\"user\": \"hi\"}}\r\n{}\n", line(SCRIPT_LINE_BYTES_MAX));
        let lines = read_script(at_limit.as_bytes(), "s").unwrap();
        assert_eq!(lines.len(), 2);
        // The last line without its newline: the limit counts what is there.
        let over = format!("\n{}", line(SCRIPT_LINE_BYTES_MAX + 1));
        let err = read_script(over.as_bytes(), "s").unwrap_err();
        assert_eq!(
            err,
            format!(
                "s:2: the line is longer than {SCRIPT_LINE_BYTES_MAX} bytes (the limit of a \
                 transcript line); refused"
            )
        );
        let err = read_script(&b"{\"user\": \"\xff\"}\n"[..], "s").unwrap_err();
        assert!(err.starts_with("s:1: not UTF-8 text"), "{err}");
    }
}

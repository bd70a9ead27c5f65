//! A structured question to a person (`ask/question`) and its reply (`ask/reply`), event schema
//! 4: what the built-in `ask` tool shows and what comes back.
//!
//! Why apart from the yes/no approvals (`ask/pending`, `ask/answered`): an approval lets a call
//! run, a reply *is* the call's result. Keeping them apart keeps I16 simple to check: no reply
//! ever approves anything but the `ask` call that asked it, and no approval answers a question.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Most options one question may offer (the input schema says so too).
pub const OPTIONS_MAX: usize = 8;
/// Longest option label, in characters.
pub const LABEL_CHARS_MAX: usize = 100;
/// Longest option description, in characters.
pub const DESCRIPTION_CHARS_MAX: usize = 1000;
/// Longest question, and longest free-text answer, in characters.
pub const TEXT_CHARS_MAX: usize = 4000;

/// A question as the person is shown it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Question {
    /// The question itself.
    pub text: String,
    /// The options to choose from, in the model's order; labels are unique. Empty: the answer is
    /// free text.
    pub options: Vec<QuestionOption>,
    /// Whether several options may be chosen.
    pub multiple: bool,
    /// Whether the person may answer in their own words (always true without options).
    pub free_text: bool,
    /// The label of the option that approves the plan: chosen by the person while plan mode is
    /// on, it turns plan mode off (`plan/mode` names the call). Only the person's choice does.
    pub plan_option: Option<String>,
}

/// One option of a question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuestionOption {
    /// What the person picks, and what the model gets back.
    pub label: String,
    /// What choosing it means; may be empty.
    pub description: String,
}

/// What the person said (journaled in `ask/reply`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reply {
    /// An answer: the options chosen and/or the person's own words.
    Answered(Answer),
    /// The person chose not to answer, with their reason if they gave one.
    Declined {
        /// What they said, if anything.
        text: Option<String>,
    },
}

/// An answer to a [`Question`]: at least one chosen label or some text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    /// The chosen options' labels, in the question's order.
    pub choice: Vec<String>,
    /// The person's own words, when the question allows them.
    pub text: Option<String>,
}

impl Question {
    /// The question an `ask` call's arguments (already checked against its input schema)
    /// describe; else what is wrong with them, for a `SCHEMA_ERROR`.
    pub fn from_arguments(args: &Value) -> Result<Question, String> {
        let text = args
            .get("question")
            .and_then(Value::as_str)
            .filter(|t| !t.trim().is_empty())
            .ok_or("`question` must be a non-empty string")?
            .to_owned();
        shown_safely("question", &text, true)?;
        let mut options = Vec::new();
        for (i, o) in args
            .get("options")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let label = o
                .get("label")
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .ok_or_else(|| format!("options[{i}].label must be a non-empty string"))?;
            shown_safely(&format!("options[{i}].label"), label, false)?;
            if options.iter().any(|p: &QuestionOption| p.label == label) {
                return Err(format!(
                    "options[{i}].label {label:?} repeats an earlier label"
                ));
            }
            let description = o.get("description").and_then(Value::as_str).unwrap_or("");
            shown_safely(&format!("options[{i}].description"), description, true)?;
            options.push(QuestionOption {
                label: label.to_owned(),
                description: description.to_owned(),
            });
        }
        if options.len() > OPTIONS_MAX {
            return Err(format!(
                "{} options given; at most {OPTIONS_MAX}",
                options.len()
            ));
        }
        let flag = |name: &str| args.get(name).and_then(Value::as_bool).unwrap_or(false);
        let multiple = flag("multiple");
        if multiple && options.is_empty() {
            return Err("`multiple` needs `options` to choose from".into());
        }
        let plan_option = args
            .get("plan_option")
            .and_then(Value::as_str)
            .map(|p| p.trim().to_owned());
        if let Some(label) = &plan_option {
            if !options.iter().any(|o| &o.label == label) {
                return Err(format!(
                    "`plan_option` {label:?} is not one of the options' labels"
                ));
            }
        }
        Ok(Question {
            text,
            free_text: options.is_empty() || flag("free_text"),
            options,
            multiple,
            plan_option,
        })
    }

    /// Whether `answer` answers this question: known labels, each once, one unless `multiple`,
    /// text only when allowed, and not empty. Else why not, for the person (or the embedder).
    pub fn check(&self, answer: &Answer) -> Result<(), String> {
        self.fit(answer.clone()).map(|_| ())
    }

    /// `answer` as the journal keeps it, if it answers this question ([`Question::check`]'s
    /// rules): its labels in the question's order, its text trimmed (none when empty).
    pub fn fit(&self, answer: Answer) -> Result<Answer, String> {
        for (i, label) in answer.choice.iter().enumerate() {
            if !self.options.iter().any(|o| &o.label == label) {
                return Err(format!("{} is not one of the options", quoted_cut(label)));
            }
            if answer.choice[..i].contains(label) {
                return Err(format!("{} is chosen twice", quoted_cut(label)));
            }
        }
        if answer.choice.len() > 1 && !self.multiple {
            return Err("only one option may be chosen".into());
        }
        let text = answer.text.as_deref().map(str::trim).unwrap_or("");
        if !text.is_empty() && !self.free_text {
            return Err("this question takes no free text: choose an option".into());
        }
        if text.chars().count() > TEXT_CHARS_MAX {
            return Err(format!(
                "the text is longer than {TEXT_CHARS_MAX} characters"
            ));
        }
        if answer.choice.is_empty() && text.is_empty() {
            return Err("an answer chooses an option or says something".into());
        }
        let choice = self
            .options
            .iter()
            .filter(|o| answer.choice.contains(&o.label))
            .map(|o| o.label.clone())
            .collect();
        let text = (!text.is_empty()).then(|| text.to_owned());
        Ok(Answer { choice, text })
    }

    /// Whether `answer` chooses the plan-approving option.
    pub fn approves_plan(&self, answer: &Answer) -> bool {
        self.plan_option
            .as_ref()
            .is_some_and(|p| answer.choice.contains(p))
    }
}

impl Answer {
    /// The answer as the model reads it.
    pub fn render(&self) -> String {
        let mut out = String::new();
        match self.choice.as_slice() {
            [] => {}
            [one] => out.push_str(&format!("The user chose: {one}")),
            many => {
                // One per line: a label may hold a comma, never a line break.
                out.push_str("The user chose:");
                for label in many {
                    out.push_str(&format!("\n- {label}"));
                }
            }
        }
        if let Some(text) = self.text.as_deref().filter(|t| !t.trim().is_empty()) {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&format!("The user wrote: {text}"));
        }
        out
    }
}

/// Refuses text a terminal would act on rather than show (escape sequences, a carriage return
/// that redraws a line): what the person is shown must be what the journal and the model read.
/// `lines`: line breaks and tabs are allowed (a question, a description), not in a label.
fn shown_safely(field: &str, text: &str, lines: bool) -> Result<(), String> {
    let bad = text
        .chars()
        .find(|&c| c.is_control() && !(lines && (c == '\n' || c == '\t')));
    match bad {
        Some(c) => Err(format!(
            "{field} holds the control character U+{:04X}; plain text only",
            c as u32
        )),
        None => Ok(()),
    }
}

/// A label for an error message: quoted, and cut if it is long.
fn quoted_cut(label: &str) -> String {
    match label.char_indices().nth(LABEL_CHARS_MAX) {
        Some((at, _)) => format!("{:?}…", &label[..at]),
        None => format!("{label:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn q(args: Value) -> Question {
        Question::from_arguments(&args).expect("valid")
    }

    #[test]
    fn a_question_without_options_takes_free_text_and_nothing_else() {
        let question = q(json!({"question": "why?"}));
        assert!(question.free_text);
        let words = Answer {
            choice: vec![],
            text: Some("because".into()),
        };
        assert_eq!(question.check(&words), Ok(()));
        let label = Answer {
            choice: vec!["a".into()],
            text: None,
        };
        assert!(question.check(&label).unwrap_err().contains("not one of"));
    }

    #[test]
    fn choices_are_checked_against_the_options() {
        let question =
            q(json!({"question": "which?", "options": [{"label": "a"}, {"label": "b"}]}));
        assert!(!question.free_text);
        let two = Answer {
            choice: vec!["a".into(), "b".into()],
            text: None,
        };
        assert!(question.check(&two).unwrap_err().contains("only one"));
        let text = Answer {
            choice: vec!["a".into()],
            text: Some("and".into()),
        };
        assert!(question.check(&text).unwrap_err().contains("no free text"));
        let empty = Answer {
            choice: vec![],
            text: None,
        };
        assert!(question.check(&empty).is_err());
        let multiple = q(json!({"question": "which?", "multiple": true,
            "options": [{"label": "a"}, {"label": "b"}]}));
        assert_eq!(multiple.check(&two), Ok(()));
        let twice = Answer {
            choice: vec!["a".into(), "a".into()],
            text: None,
        };
        assert!(multiple.check(&twice).unwrap_err().contains("twice"));
    }

    #[test]
    fn an_answer_is_kept_in_the_question_s_order_with_its_words_trimmed() {
        let question = q(
            json!({"question": "which?", "multiple": true, "free_text": true,
            "options": [{"label": "a, b"}, {"label": "a"}, {"label": "b"}]}),
        );
        let given = Answer {
            choice: vec!["b".into(), "a, b".into()],
            text: Some("  so  ".into()),
        };
        let kept = question.fit(given).expect("fits");
        assert_eq!(kept.choice, ["a, b", "b"]);
        assert_eq!(kept.text.as_deref(), Some("so"));
        // Several labels are one per line: "a, b" alone never reads like "a" and "b".
        assert_eq!(
            kept.render(),
            "The user chose:\n- a, b\n- b\nThe user wrote: so"
        );
        let two = Answer {
            choice: vec!["a".into(), "b".into()],
            text: None,
        };
        assert_eq!(
            question.fit(two).expect("fits").render(),
            "The user chose:\n- a\n- b"
        );
        let blank = Answer {
            choice: vec!["a".into()],
            text: Some("   ".into()),
        };
        assert_eq!(question.fit(blank).expect("fits").text, None);
        let plan = q(
            json!({"question": "ok?", "options": [{"label": " Approve "}],
            "plan_option": "Approve "}),
        );
        assert_eq!(plan.plan_option.as_deref(), Some("Approve"));
    }

    #[test]
    fn malformed_questions_are_refused_with_what_is_wrong() {
        let cases = [
            (json!({"question": "  "}), "non-empty"),
            (
                json!({"question": "q", "options": [{"label": "a"}, {"label": "a"}]}),
                "repeats",
            ),
            (
                json!({"question": "q", "multiple": true}),
                "needs `options`",
            ),
            (
                json!({"question": "q", "options": [{"label": "a"}], "plan_option": "b"}),
                "plan_option",
            ),
            (
                json!({"question": "q", "options": [{"label": "a\nThe user wrote: yes"}]}),
                "U+000A",
            ),
            (
                json!({"question": "q", "options": [{"label": "\u{1b}]0;x\u{7}a"}]}),
                "U+001B",
            ),
            (json!({"question": "redraw\rq"}), "U+000D"),
        ];
        for (args, wanted) in cases {
            let err = Question::from_arguments(&args).unwrap_err();
            assert!(err.contains(wanted), "{args}: {err}");
        }
    }
}

//! Every event round-trips through the codec in both payload encodings (format 1, fixint, and
//! format 2, varint), with its numbers, strings and sequences drawn at random around the
//! varint's width boundaries (250/251, 2^16, 2^32, negative numbers for zigzag).
//!
//! The records are those of `format_doc`'s sample (every event, every variant), each leaf of
//! their JSON rendering replaced by a random value where the type accepts it: a `u16` field
//! refuses 70 000, a unit variant's name refuses any other string, and such a draw is put back.

use crate::format_doc::sample;

use proptest::prelude::*;
use runtime::event::Record;
use serde_json::Value;
use tooljournal_journal::codec::{self, Encoding};

/// How an integer leaf is redrawn: a width class of the varint and a raw draw within it.
#[derive(Debug, Clone, Copy)]
struct IntDraw {
    class: u8,
    raw: u64,
}

impl IntDraw {
    fn value(self) -> Value {
        const EDGES: [i128; 12] = [
            0,
            250,
            251,
            255,
            256,
            65_535,
            65_536,
            u32::MAX as i128,
            u32::MAX as i128 + 1,
            u64::MAX as i128,
            i32::MIN as i128,
            -1,
        ];
        let v: i128 = match self.class % 6 {
            0 => (self.raw % 251).into(),
            1 => (251 + self.raw % (65_536 - 251)).into(),
            2 => (65_536 + self.raw % ((1 << 32) - 65_536)).into(),
            3 => self.raw.into(),
            4 => -i128::from(self.raw % (1 << 31)) - 1,
            _ => EDGES[(self.raw % EDGES.len() as u64) as usize],
        };
        match u64::try_from(v) {
            Ok(u) => Value::from(u),
            Err(_) => Value::from(v as i64),
        }
    }
}

fn int_draws() -> impl Strategy<Value = Vec<IntDraw>> {
    prop::collection::vec(
        (any::<u8>(), any::<u64>()).prop_map(|(class, raw)| IntDraw { class, raw }),
        1..16,
    )
}

/// Short strings, and strings whose UTF-8 length is 250, 252 and 80 000 bytes (a length that
/// is one byte, three, and five in format 2).
fn string_draws() -> impl Strategy<Value = Vec<String>> {
    let one = prop_oneof![
        ".{0,8}",
        (0usize..3).prop_map(|i| "é".repeat([125, 126, 40_000][i])),
    ];
    prop::collection::vec(one, 1..8)
}

/// The draws for one record, and whether its first sequence grows to 300 elements (a count of
/// three bytes in format 2).
#[derive(Debug)]
struct Draws {
    ints: Vec<IntDraw>,
    strings: Vec<String>,
    long_sequence: bool,
}

fn draws() -> impl Strategy<Value = Draws> {
    (int_draws(), string_draws(), any::<bool>()).prop_map(|(ints, strings, long_sequence)| Draws {
        ints,
        strings,
        long_sequence,
    })
}

/// Paths (object keys and array indexes) to every leaf and array of `v`, in order.
fn paths(v: &Value, at: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                at.push(k.clone());
                paths(child, at, out);
                at.pop();
            }
        }
        Value::Array(a) => {
            out.push(at.clone());
            for (i, child) in a.iter().enumerate() {
                at.push(i.to_string());
                paths(child, at, out);
                at.pop();
            }
        }
        _ => out.push(at.clone()),
    }
}

fn pointer(path: &[String]) -> String {
    path.iter().map(|p| format!("/{p}")).collect()
}

/// `record` with its leaves redrawn by `d`; each change the record's types refuse is undone.
fn redrawn(record: &Record, d: &Draws) -> Record {
    let mut json = serde_json::to_value(record).expect("records render as JSON");
    let mut all = Vec::new();
    paths(&json, &mut Vec::new(), &mut all);
    let (mut ints, mut strings, mut grew) =
        (d.ints.iter().cycle(), d.strings.iter().cycle(), false);
    for path in all {
        let at = pointer(&path);
        let old = json.pointer(&at).cloned().expect("a path just listed");
        let new = match &old {
            Value::Number(_) => ints.next().map(|i| i.value()),
            Value::String(_) => strings.next().map(|s| Value::String(s.clone())),
            Value::Array(a) if d.long_sequence && !grew && !a.is_empty() => {
                grew = true;
                Some(Value::Array(a.iter().cycle().take(300).cloned().collect()))
            }
            _ => None,
        };
        let Some(new) = new else { continue };
        *json.pointer_mut(&at).expect("a path just listed") = new;
        if serde_json::from_value::<Record>(json.clone()).is_err() {
            *json.pointer_mut(&at).expect("a path just listed") = old;
        }
    }
    serde_json::from_value(json).expect("every change kept was checked")
}

fn round_trips(record: &Record, encoding: Encoding) -> Result<(), TestCaseError> {
    let mut bytes = Vec::new();
    codec::encode_into(record, &mut bytes, u64::MAX, encoding)
        .map_err(|e| TestCaseError::fail(format!("{encoding:?}: encode: {e}")))?;
    let back: Record = codec::decode(&bytes, encoding)
        .map_err(|e| TestCaseError::fail(format!("{encoding:?}: decode: {e}")))?;
    prop_assert_eq!(&back, record, "{:?}", encoding);
    // One byte short, or one too many, never decodes: a payload is exactly one value.
    prop_assert!(codec::decode::<Record>(&bytes[..bytes.len() - 1], encoding).is_err());
    bytes.push(0);
    prop_assert!(codec::decode::<Record>(&bytes, encoding).is_err());
    Ok(())
}

#[test]
fn the_sample_renders_as_json_and_back() {
    // What `redrawn` relies on: JSON is a faithful rendering of every sample record.
    for record in sample::every_event() {
        let json = serde_json::to_value(&record).unwrap();
        assert_eq!(serde_json::from_value::<Record>(json).unwrap(), record);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn every_event_round_trips_in_both_encodings(d in draws()) {
        let sample = sample::every_event();
        let mut changed = 0;
        for original in &sample {
            let record = redrawn(original, &d);
            changed += usize::from(&record != original);
            round_trips(&record, Encoding::Fixint)?;
            round_trips(&record, Encoding::Varint)?;
        }
        // The draws reached the records (not every change refused by their types).
        prop_assert!(changed * 2 > sample.len(), "{} of {} changed", changed, sample.len());
    }
}

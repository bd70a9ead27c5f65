//! What the harness knows of a user's world: an [`Observer`] snapshots the external state a
//! tool touches and says what one call's effect does to it (the tool's specification, as a
//! model). The harness keeps observers behind [`World`], a type-erased room, so one case may
//! hold several worlds of different snapshot types.

use runtime::event::Evidence;
use serde_json::Value;
use std::any::Any;
use std::fmt::Debug;
use std::marker::PhantomData;

/// How a session ended abruptly, as the world meets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Crash {
    /// The process died (the journal failed and the session stopped, fail-stop): what the world
    /// keeps in the process's memory is gone; what it handed the operating system survives.
    Process,
    /// The machine lost power: only what the world made durable survives.
    PowerLoss,
}

/// One call as an observer's model sees it.
#[derive(Debug, Clone, Copy)]
pub struct CallView<'a> {
    /// The call's id.
    pub id: &'a str,
    /// The tool it called.
    pub tool: &'a str,
    /// Its arguments as its body got them (empty arguments are `{}`; `Value::Null` when they
    /// are not JSON: such a call never runs).
    pub args: &'a Value,
    /// The evidence its last `started` recorded (empty when it recorded none).
    pub evidence: &'a [Evidence],
    /// The idempotency key it was given (the same for every attempt).
    pub idempotency_key: &'a str,
}

/// An observer of the world one or more of the user's tools act on: a database row, a file, a
/// counter. The harness takes a snapshot when a case begins and when it ends, and asks the model
/// ([`Observer::apply`]) what the calls the journal says took effect should have made of the
/// first: the truth property holds when some outcome the journal allows gives the second.
pub trait Observer: Send + Sync + 'static {
    /// What the harness compares. Keep it small: only what the tools touch.
    type Snapshot: Clone + PartialEq + Debug + Send + Sync + 'static;

    /// Puts the world back as a case finds it (called before every session the harness runs,
    /// so each case starts from the same world).
    fn reset(&self);

    /// The world now.
    fn snapshot(&self) -> Self::Snapshot;

    /// What `call`'s effect, taken once, does to `state`: the tool's specification. Called for
    /// the calls whose journal word allows an effect, in the order their bodies ended; and, to
    /// name the call a contradiction comes from, for others too.
    fn apply(&self, state: &mut Self::Snapshot, call: &CallView<'_>);

    /// The session ended with `crash`: drop what the world would lose (an unflushed buffer, an
    /// unsynced write). Default: nothing is lost.
    fn crash(&self, _crash: Crash) {}
}

/// A world registered with a harness; typed, so a property reads its snapshots as they are.
pub struct WorldId<O> {
    pub(crate) index: usize,
    marker: PhantomData<fn() -> O>,
}

impl<O> WorldId<O> {
    pub(crate) fn new(index: usize) -> WorldId<O> {
        WorldId {
            index,
            marker: PhantomData,
        }
    }
}

impl<O> Clone for WorldId<O> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<O> Copy for WorldId<O> {}

impl<O> Debug for WorldId<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WorldId({})", self.index)
    }
}

/// A snapshot of some world, its type erased.
pub(crate) type AnySnapshot = Box<dyn Any + Send + Sync>;

/// An [`Observer`] with its snapshot type erased.
pub(crate) trait World: Send + Sync {
    fn reset(&self);
    fn snapshot(&self) -> AnySnapshot;
    fn apply(&self, state: &mut AnySnapshot, call: &CallView<'_>);
    fn crash(&self, crash: Crash);
    fn same(&self, a: &AnySnapshot, b: &AnySnapshot) -> bool;
    fn show(&self, a: &AnySnapshot) -> String;
    fn duplicate(&self, a: &AnySnapshot) -> AnySnapshot;
}

/// The erased form of an observer.
pub(crate) struct Erased<O>(pub(crate) O);

impl<O: Observer> Erased<O> {
    /// Every snapshot this world handles was made by its own `snapshot`.
    #[allow(clippy::expect_used)]
    fn typed(a: &AnySnapshot) -> &O::Snapshot {
        // The harness hands a world only the snapshots its own `snapshot` made (and copies).
        a.downcast_ref::<O::Snapshot>()
            .expect("a world only meets snapshots of its own type")
    }
}

impl<O: Observer> World for Erased<O> {
    fn reset(&self) {
        self.0.reset()
    }
    fn snapshot(&self) -> AnySnapshot {
        Box::new(self.0.snapshot())
    }
    fn apply(&self, state: &mut AnySnapshot, call: &CallView<'_>) {
        // As in `typed`: a snapshot of this world.
        #[allow(clippy::expect_used)]
        let typed = state
            .downcast_mut::<O::Snapshot>()
            .expect("a world only meets snapshots of its own type");
        self.0.apply(typed, call)
    }
    fn crash(&self, crash: Crash) {
        self.0.crash(crash)
    }
    fn same(&self, a: &AnySnapshot, b: &AnySnapshot) -> bool {
        Self::typed(a) == Self::typed(b)
    }
    fn show(&self, a: &AnySnapshot) -> String {
        format!("{:?}", Self::typed(a))
    }
    fn duplicate(&self, a: &AnySnapshot) -> AnySnapshot {
        Box::new(Self::typed(a).clone())
    }
}

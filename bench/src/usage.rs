//! What a run cost the whole process: CPU time (user and system, every thread's, exited ones
//! included) and context switches, from `getrusage(RUSAGE_SELF)`. The profiling subcommands
//! print it per call, so a change that trades syscalls for thread hand-offs shows up as such.

use std::time::Duration;

/// The process's resource usage at one moment.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Usage {
    pub(crate) user: Duration,
    pub(crate) system: Duration,
    /// Voluntary context switches (a thread blocked: a futex, a sync).
    pub(crate) voluntary: u64,
    /// Involuntary ones (a thread preempted).
    pub(crate) involuntary: u64,
}

impl Usage {
    /// Now, for the whole process; zeros where the kernel refuses (never on Linux).
    pub(crate) fn now() -> Usage {
        let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: `ru` is a valid, writable rusage; RUSAGE_SELF is always a valid `who`.
        let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) };
        if rc != 0 {
            return Usage {
                user: Duration::ZERO,
                system: Duration::ZERO,
                voluntary: 0,
                involuntary: 0,
            };
        }
        // SAFETY: getrusage succeeded, so it filled the struct (and it was zeroed before).
        let ru = unsafe { ru.assume_init() };
        let time = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
        };
        Usage {
            user: time(ru.ru_utime),
            system: time(ru.ru_stime),
            voluntary: ru.ru_nvcsw as u64,
            involuntary: ru.ru_nivcsw as u64,
        }
    }

    /// What happened since `before`, as one line per `calls`: microseconds of user and system
    /// CPU, and context switches.
    pub(crate) fn per_call_since(before: Usage, calls: u64) -> String {
        let after = Usage::now();
        let n = calls.max(1) as f64;
        let us = |a: Duration, b: Duration| a.saturating_sub(b).as_secs_f64() * 1e6 / n;
        format!(
            "{:.1} us user + {:.1} us system CPU, {:.2} voluntary + {:.2} involuntary context switches per call",
            us(after.user, before.user),
            us(after.system, before.system),
            after.voluntary.saturating_sub(before.voluntary) as f64 / n,
            after.involuntary.saturating_sub(before.involuntary) as f64 / n,
        )
    }
}

//! Prometheus metrics, served at `/metrics` in the text exposition format.
//!
//! One [`Metrics`] per server (no process-global recorder), so several servers in one test
//! process keep separate counts. The interaction and refusal counters are fed through the
//! registry's [`Lifecycle`] hook; channels register their own metrics with
//! [`Metrics::register`].
//!
//! Every series whose labels are known in advance starts at 0 rather than appearing with the
//! first count (so that `rate()` and alerts see it from the start): the long-poll outcomes,
//! refusals on the built-in entry points (`api`, `desktop`, `terminal`), and for each channel
//! ([`Metrics::add_channel`]) its outbox backlog, its deliveries by result and its refusals.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Metric, Registry};

use crate::interaction::{Interaction, Lifecycle, LongPoll, Via};
use crate::sync::LockExt;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResolvedLabels {
    kind: String,
    outcome: String,
    via: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SteeredLabels {
    outcome: String,
    via: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PolicyLabels {
    rule: String,
    decision: String,
    mode: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AnswerLabels {
    kind: String,
    outcome: String,
}

/// Labels of per-channel metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ChannelLabels {
    /// The channel (outbox handler) name.
    pub channel: String,
}

/// Labels of outbox delivery results.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DeliveryLabels {
    /// The channel (outbox handler) name.
    pub channel: String,
    /// `ok`, `retry` or `failed`.
    pub result: String,
}

/// Every value of [`DeliveryLabels::result`].
const DELIVERY_RESULTS: [&str; 3] = ["ok", "retry", "failed"];

fn time_to_answer_histogram() -> Histogram {
    Histogram::new([
        0.5, 1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
    ])
}

/// The server's metrics.
pub struct Metrics {
    // A std mutex: registration happens at start-up and encoding is synchronous.
    registry: Mutex<Registry>,
    pending: Gauge,
    created: Family<KindLabels, Counter>,
    resolved: Family<ResolvedLabels, Counter>,
    time_to_answer: Family<AnswerLabels, Histogram, fn() -> Histogram>,
    /// Unfinished outbox jobs by channel (set at scrape time).
    outbox_backlog: Family<ChannelLabels, Gauge>,
    /// The channels known so far ([`Metrics::add_channel`]): their backlog is 0 when the store
    /// has no job of theirs.
    channels: Mutex<BTreeSet<String>>,
    /// Outbox delivery attempts by channel and result.
    pub deliveries: Family<DeliveryLabels, Counter>,
    /// Refused answer attempts by channel.
    refusals: Family<ChannelLabels, Counter>,
    /// Refusals kept out of the log and audit trail by the rate limit, by channel.
    refusals_suppressed: Family<ChannelLabels, Counter>,
    /// Long-poll waits by how they ended: ready, woken, timed out (in that order; the
    /// handles are taken once so counting allocates nothing).
    long_polls: [Counter; 3],
    /// Decisions of policy rules and grants (all grants under the rule label `grant`), by
    /// rule, decision and mode.
    policy: Family<PolicyLabels, Counter>,
    /// People's messages to agent sessions, by outcome (queued, delivered) and where from.
    steered: Family<SteeredLabels, Counter>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LongPollLabels {
    outcome: String,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Fresh metrics with the core families registered.
    pub fn new() -> Self {
        let long_polls = Family::<LongPollLabels, Counter>::default();
        let long_poll = |o: LongPoll| {
            long_polls
                .get_or_create(&LongPollLabels {
                    outcome: o.as_str().into(),
                })
                .clone()
        };
        let long_poll_counters = [
            long_poll(LongPoll::Ready),
            long_poll(LongPoll::Woken),
            long_poll(LongPoll::TimedOut),
        ];
        let metrics = Self {
            registry: Mutex::new(Registry::default()),
            pending: Gauge::default(),
            created: Family::default(),
            resolved: Family::default(),
            time_to_answer: Family::new_with_constructor(time_to_answer_histogram),
            outbox_backlog: Family::default(),
            channels: Mutex::new(BTreeSet::new()),
            deliveries: Family::default(),
            refusals: Family::default(),
            refusals_suppressed: Family::default(),
            long_polls: long_poll_counters,
            policy: Family::default(),
            steered: Family::default(),
        };
        metrics.register_core(long_polls);
        // Answers come through these whatever channels are configured.
        for via in [Via::api(), Via::desktop(), Via::terminal()] {
            metrics.known_refusals(via.as_str());
        }
        metrics
    }

    /// Registers the core families (`long_polls` is the family whose counters
    /// [`Metrics::long_polls`] holds).
    fn register_core(&self, long_polls: Family<LongPollLabels, Counter>) {
        let mut registry = self.registry.locked();
        registry.register(
            "imrelay_long_polls",
            "Waits for an answer (/wait, create with wait_secs, hooks) by how they ended: ready (already resolved), woken (answered while waiting), timed_out",
            long_polls,
        );
        registry.register(
            "imrelay_interactions_pending",
            "Interactions awaiting an answer",
            self.pending.clone(),
        );
        registry.register(
            "imrelay_interactions_created",
            "Interactions created, by kind",
            self.created.clone(),
        );
        registry.register(
            "imrelay_interactions_resolved",
            "Interactions resolved, by kind, outcome and channel",
            self.resolved.clone(),
        );
        registry.register(
            "imrelay_time_to_answer_seconds",
            "Time from creation to resolution",
            self.time_to_answer.clone(),
        );
        registry.register(
            "imrelay_outbox_backlog",
            "Outbox jobs not yet delivered, by channel",
            self.outbox_backlog.clone(),
        );
        registry.register(
            "imrelay_outbox_deliveries",
            "Outbox delivery attempts, by channel and result (ok, retry, failed)",
            self.deliveries.clone(),
        );
        registry.register(
            "imrelay_answer_refusals",
            "Refused answer attempts (bad signatures, forged or foreign buttons, non-approvers, late or invalid answers), by channel",
            self.refusals.clone(),
        );
        registry.register(
            "imrelay_refusals_suppressed",
            "Refusals not bound to an interaction that the per-channel rate limit kept out of the log and the audit trail, by channel",
            self.refusals_suppressed.clone(),
        );
        registry.register(
            "imrelay_policy_decisions",
            "Decisions of policy rules and grants at creation (shadow rules: what they would have decided), by rule, decision and mode; every grant counts under rule=\"grant\"",
            self.policy.clone(),
        );
        registry.register(
            "imrelay_session_messages",
            "People's messages to agent sessions, by outcome (queued, delivered) and where they came from",
            self.steered.clone(),
        );
    }

    /// Makes the series of `channel` (a channel's name, as it delivers through the outbox and
    /// as answers from it are labelled) known, at 0 until something is counted: its outbox
    /// backlog, its deliveries by result, its refused answers and suppressed refusals.
    pub fn add_channel(&self, channel: &str) {
        self.channels.locked().insert(channel.to_string());
        drop(self.outbox_backlog.get_or_create(&ChannelLabels {
            channel: channel.to_string(),
        }));
        for result in DELIVERY_RESULTS {
            drop(self.deliveries.get_or_create(&DeliveryLabels {
                channel: channel.to_string(),
                result: result.to_string(),
            }));
        }
        self.known_refusals(channel);
    }

    fn known_refusals(&self, channel: &str) {
        let labels = ChannelLabels {
            channel: channel.to_string(),
        };
        drop(self.refusals.get_or_create(&labels));
        drop(self.refusals_suppressed.get_or_create(&labels));
    }

    /// Sets the outbox backlog gauges from the store's count of unfinished jobs per channel:
    /// 0 for a known channel without any, and no series for a channel that is neither known
    /// nor has jobs (one removed from the configuration whose jobs are gone).
    pub fn set_outbox_backlog(&self, backlog: Vec<(String, u64)>) {
        self.outbox_backlog.clear();
        for channel in self.channels.locked().iter() {
            drop(self.outbox_backlog.get_or_create(&ChannelLabels {
                channel: channel.clone(),
            }));
        }
        for (channel, n) in backlog {
            self.outbox_backlog
                .get_or_create(&ChannelLabels { channel })
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }

    /// Makes the series of a configured policy rule known, at 0 until it decides something.
    pub fn add_policy_rule(&self, rule: &str, decision: &str, mode: &str) {
        drop(self.policy.get_or_create(&PolicyLabels {
            rule: rule.to_string(),
            decision: decision.to_string(),
            mode: mode.to_string(),
        }));
    }

    /// Registers a channel's own metric.
    pub fn register(&self, name: &str, help: &str, metric: impl Metric) {
        self.registry.locked().register(name, help, metric);
    }

    /// Counts one outbox delivery attempt.
    pub fn delivery(&self, channel: &str, result: &str) {
        self.deliveries
            .get_or_create(&DeliveryLabels {
                channel: channel.to_string(),
                result: result.to_string(),
            })
            .inc();
    }

    /// Encodes everything, with the pending gauge set to `pending`.
    pub fn encode(&self, pending: usize) -> String {
        self.pending.set(pending as i64);
        let mut out = String::new();
        let registry = self.registry.locked();
        if prometheus_client::encoding::text::encode(&mut out, &registry).is_err() {
            tracing::error!("could not encode metrics");
        }
        out
    }
}

impl Lifecycle for Metrics {
    fn steered(&self, via: &str, outcome: &str) {
        self.steered
            .get_or_create(&SteeredLabels {
                outcome: outcome.into(),
                via: via.into(),
            })
            .inc();
    }

    fn long_poll(&self, outcome: LongPoll) {
        let i = match outcome {
            LongPoll::Ready => 0,
            LongPoll::Woken => 1,
            LongPoll::TimedOut => 2,
        };
        self.long_polls[i].inc();
    }

    fn refused(&self, via: &Via, recorded: bool) {
        let labels = ChannelLabels {
            channel: via.as_str().to_string(),
        };
        self.refusals.get_or_create(&labels).inc();
        if !recorded {
            self.refusals_suppressed.get_or_create(&labels).inc();
        }
    }

    fn policy(&self, _i: &Interaction, d: &crate::interaction::policy::Decided) {
        self.policy
            .get_or_create(&PolicyLabels {
                rule: if d.grant.is_some() {
                    "grant".into()
                } else {
                    d.rule.clone()
                },
                decision: d.decision.as_str().into(),
                mode: d.mode.as_str().into(),
            })
            .inc();
    }

    fn created(&self, i: &Arc<Interaction>) {
        self.created
            .get_or_create(&KindLabels {
                kind: i.kind.as_str().into(),
            })
            .inc();
    }

    fn resolved(&self, i: &Arc<Interaction>) {
        let Some(r) = &i.resolution else { return };
        self.resolved
            .get_or_create(&ResolvedLabels {
                kind: i.kind.as_str().into(),
                outcome: r.outcome.as_str().into(),
                via: r.via.as_str().into(),
            })
            .inc();
        if let Some(d) = i.time_to_answer() {
            self.time_to_answer
                .get_or_create(&AnswerLabels {
                    kind: i.kind.as_str().into(),
                    outcome: r.outcome.as_str().into(),
                })
                .observe(d.as_secs_f64());
        }
    }
}

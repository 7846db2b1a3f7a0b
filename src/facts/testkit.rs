//! Reading one fact on the scripted fake transport and on the plan connector, for the facts'
//! unit tests: the command that was sent, the value, the `Unreadable` error, the placeholder.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::event::Events;
use crate::facts::Fact;
use crate::inventory::Host;
use crate::lifecycle::plan::PlanConnector;
use crate::lifecycle::runner::{FanOut, Runner, Timeouts};
use crate::transport::fake::FakeConnector;
use crate::transport::Connector;

pub const NODE: &str = "m1";

fn runner(c: Arc<dyn Connector>) -> Runner {
    Runner::new(c, Events::channel().0, FanOut::default(), Timeouts::default())
}

fn node() -> Host {
    Host::for_test(NODE, "192.0.2.1")
}

/// Read `fact` on a fake node that prints `out`: the one command sent (as shown) and the result.
pub async fn read<F: Fact>(fact: &F, out: &str) -> (String, Result<F::Value>) {
    let fake = FakeConnector::new();
    fake.reply(None, "", out);
    let got = runner(Arc::new(fake.clone())).read(&node(), fact).await;
    let sent = fake.execs(NODE);
    assert_eq!(sent.len(), 1, "one command: {sent:?}");
    (sent[0].clone(), got)
}

/// The value read from `out`, which must parse.
pub async fn value<F: Fact>(fact: &F, out: &str) -> F::Value {
    match read(fact, out).await.1 {
        Ok(v) => v,
        Err(e) => panic!("{out:?} should read: {e}"),
    }
}

/// The message of the `Unreadable` error `out` gives, after checking that the error names the
/// node, the command sent and the fact.
pub async fn unreadable<F: Fact>(fact: &F, out: &str) -> String {
    match read(fact, out).await {
        (sent, Err(Error::Unreadable { node, command, what, message })) => {
            assert_eq!((node.as_str(), command, what), (NODE, sent, fact.what()));
            message
        }
        (_, Err(e)) => panic!("{out:?}: not an unreadable error: {e}"),
        (_, Ok(_)) => panic!("{out:?} should not read"),
    }
}

/// What a plan goes on with: nothing runs, the fact's placeholder comes back.
pub async fn planned<F: Fact>(fact: &F) -> F::Value {
    match runner(Arc::new(PlanConnector::new())).read(&node(), fact).await {
        Ok(v) => v,
        Err(e) => panic!("a plan reads the placeholder: {e}"),
    }
}

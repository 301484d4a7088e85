//! What an effect's invoke or inspect observed, as text and JSON: `invocation` is the answer
//! (`unknown` never licenses a retry).

use sf_host::git_object::ObjectId;
use sf_host::repository::{DeliveryObservation, IntegrationObservation, RemoteReading};

use crate::common::{Output, json_value};

/// An integration's observation.
pub fn integration(observed: &IntegrationObservation) -> Output {
    let text = format!(
        "invocation    {}\ndispatched    {}\npostcondition {}\ntarget        {}\ndispatch      {}\nreceipt       {}\nproblem       {}\n",
        observed.invocation.as_str(),
        observed.dispatched,
        observed.postcondition.as_str(),
        observed.target.map_or("-".into(), |id| id.to_hex()),
        observed.dispatch.map_or("-".into(), |id| id.to_hex()),
        observed
            .receipt
            .as_ref()
            .map_or("-".into(), |r| r.id.to_hex()),
        observed.problem.as_deref().unwrap_or("-"),
    );
    Output {
        json: json_value(&observed.to_value()),
        text,
    }
}

/// A delivery's observation.
pub fn delivery(observed: &DeliveryObservation) -> Output {
    let hex = |id: Option<ObjectId>| id.map_or("-".into(), |id| id.to_hex());
    let (target, marker) = match &observed.reading {
        RemoteReading::Read { target, marker } => (hex(*target), hex(*marker)),
        RemoteReading::Unreadable(_) => ("(unreadable)".into(), "(unreadable)".into()),
    };
    let text = format!(
        "invocation    {}\ndispatched    {}\npostcondition {}\nremote        {}\nref           {} (names {target})\nmarker        {marker} (tag {})\ncommit        {}\ndispatch      {}\nreceipt       {}\nproblem       {}\n",
        observed.invocation.as_str(),
        observed.dispatched,
        observed.postcondition(),
        observed.remote,
        observed.remote_ref,
        observed.tag,
        observed.commit,
        hex(observed.dispatch),
        hex(observed.receipt),
        observed.problem.as_deref().unwrap_or("-"),
    );
    Output {
        json: json_value(&observed.to_value()),
        text,
    }
}

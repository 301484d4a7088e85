//! Golden bytes: every record format and wire message sf hashes, stores or sends, encoded
//! from fixed inputs, must give exactly the bytes it gave when these vectors were written
//! (their length and SHA-256 below). A restructuring that changes one byte of any of them
//! fails here; a deliberate format change needs a new protocol string, and new vectors.
//!
//! Run with `SF_GOLDEN_PRINT=1` to print the table of what the code gives now.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use sf_host::assurance::{
    Acceptance, Check, CheckVerdict, Decision, EnvironmentRecord, OBSERVATION_FORMAT_V2,
    OBSERVATION_FORMAT_V3, OBSERVATION_FORMAT_V4, Observation, ObservationFacts, ObservationStatus,
    Outcome, Phase, ProcessFacts, REVIEW_FORMAT, Recipe, Review, ReviewCheck, ReviewRequirement,
    ReviewSubject, ReviewVerdict, Reviewer, SliceRecord, Stage, Verdict, judge::Reviews,
};
use sf_host::canonical::{self, Digest, Value};
use sf_host::contracts::tree_path::EntryMode;
use sf_host::contracts::{
    AttemptId, EncodedObject, Enforcement, EvidenceRecord, ExecutorError, GateAnswer, GateError,
    Limit, LimitHit, NamespaceDisposition, ObjectStoreError, ProfileDescription, ReadableKind,
    ReadablePath, RefName, RefUpdate, RefValue, RunAnswer, RunBounds, RunEntry, RunIdentities,
    RunRequest, RunStatus, RunTimes, RuntimeDescription,
};
use sf_host::git_object::{self, Commit, ObjectId, ObjectKind};
use sf_host::plugin::executor_protocol::RunWire;
use sf_host::plugin::object_store_protocol;
use sf_host::plugin::{evidence_store_protocol, executor_protocol, gate_protocol};
use sf_host::repository::{
    Author, CandidateManifest, CandidateProtocol, FileEdit, FrozenInputs, IDENT, ImportRecord,
    ManifestEdit, ManifestEntry, ManifestFile, Proposal, ProposalBounds, ProposalMessage, Slice,
    SliceBinding, TreeContents, candidate_idents, candidate_message, dispatch_message,
    intent_message, legacy_candidate_message, parse_repository_identity, receipt_message,
};
use sf_host::snapshot::{SnapshotFile, snapshot_digest};

/// The review records: an acceptance counting a review check (version 4), the review subject,
/// a review (unsigned and signed) and its Evidence record, and a Verdict with reviews
/// (version 2).
fn review_vectors(
    v: &mut BTreeMap<&'static str, Vec<u8>>,
    acceptance: &Acceptance,
    pins: &sf_host::assurance::RepositoryPins,
    attempt: &AttemptId,
    verdict: &Verdict,
) {
    let mut counted = acceptance.clone();
    counted.checks.push(Check::Review(ReviewCheck {
        id: "human".into(),
        prompt: "Does the fix read right?".into(),
        requirement: Some(ReviewRequirement {
            approvals: 1,
            reviewers: vec![
                Reviewer {
                    name: "alice".into(),
                    key: Some(
                        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIApFSYNzqs5gpK0T7WijAH1sr06jJkccGfPCfFIewY35"
                            .into(),
                    ),
                },
                Reviewer {
                    name: "bob".into(),
                    key: None,
                },
            ],
        }),
    }));
    v.insert("acceptance-v4", counted.to_bytes().unwrap());
    let subject = ReviewSubject::new(pins, attempt, verdict.digest().unwrap());
    v.insert("review-subject", subject.to_bytes().unwrap());
    let review = Review {
        at: "2026-01-02T03:04:05.678Z".into(),
        candidate: digest("candidate"),
        check: "human".into(),
        decision: Decision::Approve,
        reason: "Read the diff;\nthe sums are right.".into(),
        reviewer: "bob".into(),
        signature: None,
        subject: subject.digest().unwrap(),
    };
    v.insert("review", review.to_bytes().unwrap());
    let signed = Review {
        reviewer: "alice".into(),
        decision: Decision::Reject,
        signature: Some(
            "-----BEGIN SSH SIGNATURE-----\nU1NIU0lH\n-----END SSH SIGNATURE-----\n".into(),
        ),
        ..review.clone()
    };
    v.insert("review-signed", signed.to_bytes().unwrap());
    v.insert("review-signed-message", signed.signed_message().unwrap());
    let record = EvidenceRecord::new(
        pins.digest().unwrap(),
        attempt.clone(),
        REVIEW_FORMAT,
        &review.to_bytes().unwrap(),
    )
    .unwrap();
    v.insert("evidence-record-review", record.bytes().to_vec());
    let reviewed = Verdict {
        outcome: Outcome::Inconclusive,
        reasons: vec![
            "review check human: awaiting 1 more approval(s) (0 of 1) from alice, bob".into(),
        ],
        reviews: Some(Reviews {
            subject: subject.digest().unwrap(),
            subject_record: subject.clone(),
            process: Outcome::Verified,
            checks: vec![ReviewVerdict {
                check: "human".into(),
                approvals: 1,
                approved_by: Vec::new(),
                records: Vec::new(),
                rejected_by: vec![("carol".into(), digest("rejection"))],
                met: None,
                problems: vec!["awaiting 1 more approval(s) (0 of 1) from alice, bob".into()],
            }],
        }),
        ..verdict.clone()
    };
    v.insert("verdict-v2", reviewed.to_bytes().unwrap());
}

/// (name, length, sha256 hex) of every vector, as written.
#[rustfmt::skip]
const GOLDEN: &[(&str, usize, &str)] = &[
    ("delivery-dispatch-message", 144, "29c77f5c99675f0dcd73a8b9d0c9a8d66e08eda9620fa21f233cc9d133f4f5ac"),
    ("delivery-intent-message", 102, "1b1afc7ced791fc347bb56689cd161592d8ca974dd58240ee95fcf34198cdb9b"),
    ("delivery-marker-tag", 427, "c61a4ceb099e1fbf82ff543d14cc2f12371f3fb60d21ea6f6913277d6ef617c6"),
    ("delivery-payload", 917, "947a7c2c2d13f50a481ef7ebcb962b53a462be34fd9ebb0c82e5391d520d3eb3"),
    ("delivery-receipt-delivered", 171, "679d560e5a01bce808def362561b34b6054a644019904c7b157100747a2f6283"),
    ("delivery-receipt-refused", 174, "eae8e84eed0c237a53a542a48338066a934d090d381b14336429a05b98264ecb"),
    ("integration-refs", 282, "daec50c4af0f1d3525440f910a21793d8072fca0d7bef87169d49afc0248fae6"),
    ("delivery-refs", 276, "5cc5e2bf39c9a1008dc4afb5f59a6191a4110faf91a8b3840087594d3dff461a"),
    ("delivery-marker-ref", 82, "ce0a3924eb365f41cd4a3be048991705063cc2d0bc3aaa411b3b26432d6266c4"),
    ("upstream-record", 174, "c5cb73211c466254cb6ac5a1b48930c3cf90dc1f784c80161e19308ef0fde891"),
    ("observation-v5", 1742, "64fdcd35af8841fa728fa1c5369d6e9feff859316c97d3fea6f8707d7a318f6e"),
    ("observation-v4", 1727, "ab7f27f84aacaeefa45a634bbdaec7b55f7655020281601b8da09eb2d27caefd"),
    ("run-command", 366, "5d897824d2f9bf9908783256f15ad8fb7b31ff718e813ea5f2a130fa6b2426f8"),
    ("executor-request-v6-command", 913, "db6df7ad26295d4829ef74e9740ffdebd4626a6da339708d6d63a1a4708f7dfe"),
    ("executor-answer-v6-results", 1386, "4f566603e024cb359e547fc5ce39743a78cfe9df98bdc7a9aae6c5b8e727af20"),
    ("executor-answer-v5", 1170, "1d395f403093f2d252662c24a4063a174700dd255201fc7b8e7cf5c8489f0f42"),
    ("executor-answer-v4-with-hits", 1164, "9950c7ca3794cc2d96b6e548f2a33c1d9009c385b45541b9bb4eff5fc607a72c"),
    ("candidate-commit-v3", 512, "857532993d46c4ce13d5c4dff4b9be7ed7212d4593e3583aa2ca8dce311b9427"),
    ("candidate-message-v3", 309, "54aaeded3135d60eccc011bb17c7ffed5514f946399c09c2400df64b4fdf12c5"),
    ("candidate-message-v3-untitled", 296, "39a6fcde2836b1ef6b55b9bc76ffabd5416e27d890acc4f51048a81341e4a7c7"),
    ("manifest-v3", 1803, "208042bf2ec71665a1cf4257f70de56620a08737a8f0bfedcc26f872214eb2aa"),
    ("pins-tree-digests", 1377, "570ba898177db9ce82f6e847cfff74ff56a65967bab17b43e3a0855c770da727"),
    ("manifest-v4", 1893, "e2dafb5fe2efa74d90e729b19d06e75d4cbee888dca31137bc47b614e8633044"),
    ("candidate-message-v4", 309, "2d77ed1a3a35a13e6f3393bdf93a2d6066ae7b5c1e6d3dc3c19c176dd899ae7e"),
    ("proposal-v1", 58, "4de3a50218a71d6389c035e08226c46c3768db9dc5064fbf25e4fec182955204"),
    ("proposal-v2", 663, "36769f727459f0e175a7e12cb85752417db5cd2a04532021592b22f9c22bfed4"),
    ("slice-record-bounds", 921, "467985f37d7996df22d956105893835efc22a1d86c21e2a8748e40b1a71c5913"),
    ("acceptance-v4", 1379, "fcc904a2fc96413af883304dc2f03014216d61808d605025828c9898fc3906d6"),
    ("review-subject", 473, "17b3cb08b35ba8604e81cc4e4286967d458f3433c57575d5b74b7e0bd2848bc1"),
    ("review", 346, "4c6928d8d6402b58643c44fd8cd5a6a08f9ee305a1d577b8aeb5c4f39a37b474"),
    ("review-signed", 415, "be3d2e2246069566730cffad67066ef458b447ae0fcfeb08cd9de913c335118c"),
    ("review-signed-message", 347, "35fff3f3e108fc3cce336137e13dbe60b5cc090193b5e46e711e6770561f41e0"),
    ("evidence-record-review", 529, "a4e98bbd68c3113564a4db3f40d6032caa3e987abe4d9fd1fcdca8eeaa7f0727"),
    ("verdict-v2", 846, "3014796a11408b1cd0db1295f158b0fe61d736fc0cde49e9cb8becd9f1535202"),
    ("slice-record-closed", 1061, "e1f62ec6b3dffde059d1b9a5b674941c744f2bd89ba53685142ac7114965348e"),
    ("slice-record-forbidden", 916, "d50ce71354149639aede633ad68ffb49af36da330562bc23a237e6460aa0a613"),
    ("fence-epoch", 54, "e82f1f33df9a9e7d1bf6e65aa96320ee61799e0f5451c212858813fa3248bc31"),
    ("stored-snapshot", 385, "3c77dff5b18eac597aa9add058d42767b51c2b17b7ace8a9e3dec011c60286ba"),
    ("stored-snapshot-v2", 561, "97c205ac5b4efc007857ee9429b03fe061c260a1d70920752959773796a2fac0"),
    (
        "acceptance",
        1152,
        "01a7ab01fa1a769d3f3393b561a0304a20c1359c84764fc73879b13c9edab10a",
    ),
    (
        "bounds-digest",
        71,
        "11b6c70f7538464ee0bb89d2c98a058bf855808aa321a17c7d06d67e25bf743e",
    ),
    (
        "candidate-commit",
        651,
        "9f10e0d812690a6ab4e727fddbe7c658491ae5d7f8b291b1d7498273c356920c",
    ),
    (
        "candidate-message-v1",
        385,
        "3d9f11ab87134da2dbee151ab660a255f6fac40998fae7d64c9daee5fe532813",
    ),
    (
        "candidate-message-v2",
        471,
        "8ed25f41e3e5d4e3b07526a7e30fa1c1fe55e05abe0b78403b226651f87be9a5",
    ),
    (
        "dispatch-message",
        147,
        "b00f7d7c5795b9bafcd84fc8be6fedd5b7f63a4c7da32016efe0fb37ab66301e",
    ),
    (
        "environment",
        247,
        "6511386c04fb0c9a3ae486f3fff3263018c0f8b139cc7bac01983c925cdb48a8",
    ),
    (
        "evidence-find",
        101,
        "10d2922bd03637a1c8a0c85227058c4cd7b098a372a65c8fe9d55564a96c2bbc",
    ),
    (
        "evidence-ids",
        161,
        "a0fe44a76e4ff76972cad551f2372d51468f96882ed89b42c7c5189d124eab6d",
    ),
    (
        "evidence-put",
        1811,
        "5db2957246d2769164a60fd6a1d92a8bfd6ad172975fe59ead0c859bcca4d9b3",
    ),
    (
        "evidence-record",
        1772,
        "1571d7d62617bee1fe6b7694e4ca3b19c1c2081efd3bb22f4196008dd2af7f55",
    ),
    (
        "executor-answer-v1",
        865,
        "b329ba245e372f4705fd424503eed72ea1e5da2acc9e32e726237b08a2a6a31b",
    ),
    (
        "executor-answer-v2",
        1025,
        "4187eef999484666e0b571ac38096e8ec171731d57887eb81d1c38679e71ce4d",
    ),
    (
        "executor-answer-v3",
        1029,
        "c714f947d14ea89a269f05e156ad012aef922ace46e2d1494cd23c484b41f7c6",
    ),
    (
        "executor-cancel",
        15,
        "19c304667561b4a45c9feba9ebacc31413c79283545e47cd2f8174a738f5f051",
    ),
    (
        "executor-error",
        106,
        "243515e3f6bb5f2a374ef7047979eb8c6c2c67b4e067f454c10529d46bc0ba9c",
    ),
    (
        "executor-profile",
        114,
        "1762b27909ef65c0fbbf2a0a271f4578aae00f839dd10cce8057c8d15b545049",
    ),
    (
        "executor-run-v1",
        298,
        "bd047010244d5c7589704fdf6491bfea1894acf1418d9e1ea260d0e6fe6b4e60",
    ),
    (
        "executor-run-v2",
        397,
        "38a54b1baa3de5ff16a091707ca7f02661078e13a83bc442450961a8e35fb149",
    ),
    (
        "executor-run-v3",
        397,
        "38a54b1baa3de5ff16a091707ca7f02661078e13a83bc442450961a8e35fb149",
    ),
    (
        "executor-run-v4",
        527,
        "a84e7eacc89a2cf374a0dbc26fbb24182249c01663c03814769ccc1cb6d99902",
    ),
    (
        "executor-runtime",
        175,
        "72795b5cbd97c6397f6ac3763f4c9fc941372ee0d7efe287432819ecfe665177",
    ),
    (
        "gate-answer",
        49,
        "e43eb9c68848b08ec4b91b42cac605b274ac016479385cf62f8860276976573f",
    ),
    (
        "gate-current",
        20,
        "1143af4d831db70e0e2d3d84bf63463eb5e92e7fae444a39dbd9da6b87df81ac",
    ),
    (
        "gate-error",
        84,
        "34632646c24e8d55dd6cda0fdbe5240d1f0729407db0609906318cdae378db4f",
    ),
    (
        "identity-and-marker",
        243,
        "39c38ddb61ffa01e2fdd60bf5a80eba5a94240d117a26c4a8791e51965e1c5b1",
    ),
    (
        "import-record",
        213,
        "ee727550416d58edb9c727803809dd5a72d0210e20aaa72b5716349c7fb6829b",
    ),
    (
        "import-record-commit",
        192,
        "f49aa1cc7c00a380d481a787b5c2d7b257d6413cc3efb08e6fa58f57b1c5b5aa",
    ),
    (
        "import-record-tree",
        39,
        "91d754223b04f8a2ec01af582944698e94b093bed0bc3976ce0ba0ee98e78eff",
    ),
    (
        "initial-message",
        81,
        "65aa4e1203cc03b6bd2d5dfc1ec703e63ffbf0d1a5899a66df95d0b94a20798f",
    ),
    (
        "intent-message",
        105,
        "af53d22eb680597b7bf1a92a5e8b9a82089b1998607ef1fd3200a4babcb44642",
    ),
    (
        "manifest-v1",
        1308,
        "c8ee700fb6486b4bdc461c7ba14143e1decb89b96f959352497e26d6810bcf5d",
    ),
    (
        "manifest-v2",
        1433,
        "1d3527fbc4f4ea80e638406453616f27be8a598d6549bf5918a09eaf877725f8",
    ),
    (
        "observation-v2",
        1572,
        "ba74107a1a8b30d3f0ea681e9368dc894830aa5466404977357aa17eba38223b",
    ),
    (
        "observation-v3",
        1592,
        "24af11cf3a95004ccede7850330b82ca014321c978a0054357fc6df9eb1a99b9",
    ),
    (
        "pins",
        1358,
        "6822835ef856af2420f3dda0363275e2a3ca3cc3fd47064ef7787550e67c1dd5",
    ),
    (
        "receipt-message",
        155,
        "1afeb11b7d0f6d597f73b1da1e3d053f9398bd2f8be0f2427b5b7990b8c54459",
    ),
    (
        "recipe-v1",
        193,
        "65b0fe8f7a21dc0b51b63a583ca1d31bb48c7e719a42ed61eb7513f08a4f4b23",
    ),
    (
        "recipe-v2",
        237,
        "410500c1ebde8e98fd068bdaaa4e59abc0ddba732f3a116a329928ee52107f8e",
    ),
    (
        "seal-message",
        10,
        "775c1b6e8cf4062e658889ef905d2f5fc29b0cd29eb1d5db09ceecb362a214ba",
    ),
    (
        "slice-record",
        882,
        "6d982d18a0c1d41186b8f6b5af6d86047751fd1d7806fe4797607cb00fcdcead",
    ),
    (
        "snapshot-digest",
        71,
        "21447054490f4733b1f55de7d58bd359a28601b5991fe01d01f2823276075ea0",
    ),
    // sf-snapshot/2 of `moded_program()`, also computed outside Rust from the framing in
    // docs/formats.md: sha256:030db841da1dcd42e9c6cfbcc48922b745ad104bf4684d9446e21e0f573ac812.
    (
        "snapshot-digest-v2",
        71,
        "5cd532b5c8159108bbfe482f958a8e8423673fae2dd577e503d2c13db22a3a15",
    ),
    (
        "store-cas",
        148,
        "c51ee1a6b6a1a0c321852e507717e48959dd1376bbd497d7faec2bfd9eb7bdf8",
    ),
    (
        "store-error",
        122,
        "911008e9e0cb0991215b97c2f633cb53e4da80ac0f0547a0871870a1ebd33c79",
    ),
    (
        "store-read-objects",
        128,
        "b518912191bf310f265a903db968879d3de005068c6f160ef975373f3fda3abf",
    ),
    (
        "store-read-scope",
        6,
        "921b77cde0911b9af6692f0ad63c30ec6f8485d8319af0c61ae285cebc83f203",
    ),
    (
        "store-ref-update",
        100,
        "1af82095bce46905a7908bc61473bce1bbbdb8152406b0c3cbdd71e206f0bebb",
    ),
    (
        "store-ref-value",
        67,
        "f007586197e4b70e7d1a5eeac4dc4bff8414092688a1b2892789a847fbe981c6",
    ),
    (
        "store-write-objects",
        118,
        "1a792c8750804a00c259920719716785ca0694b39821383ae8c7dea627ec8fa9",
    ),
    ("tree-directory", 263, "faff44abb876afa57dafd0a3ebf830d7620bd368f17577c042db8cd6efba3b4a"),
    (
        "verdict",
        379,
        "e36a02fe52afb24780882ada1830e22a7672d3e4df4171d0892643e3e9dfa0a1",
    ),
];

fn digest(text: &str) -> Digest {
    Digest::of(text.as_bytes())
}

fn oid(fill: char) -> ObjectId {
    ObjectId::parse_hex(&fill.to_string().repeat(40)).unwrap()
}

fn file(path: &str, content: &[u8]) -> SnapshotFile {
    SnapshotFile::regular(path, content.to_vec())
}

fn identity() -> sf_host::repository::RepositoryIdentity {
    parse_repository_identity(
        br#"{"dev":2049,"initial":"1111111111111111111111111111111111111111","ino":77,"nonce":"0123456789abcdef0123456789abcdef","objectFormat":"sha1","path":"/srv/sf/golden","productId":"golden","protocol":"sf-repository/1","targetRef":"refs/heads/main"}"#,
    )
    .unwrap()
}

/// The delivery records: the upstream record, the payload, the marker tag, and the messages of
/// the intent, dispatch and receipt commits.
fn delivery_vectors(v: &mut BTreeMap<&'static str, Vec<u8>>) {
    use sf_host::repository::{
        Action, DeliveryMode, DeliveryPayload, Owner, ReceiptOutcome, Upstream, UpstreamRecord,
        delivery_dispatch_message, delivery_intent_message, delivery_receipt_message, marker_ref,
        marker_tag,
    };
    let upstream = UpstreamRecord {
        product: "golden".into(),
        base: oid('1'),
        upstream: Upstream {
            url: "https://git.example.org/team/golden.git".into(),
            branch: "main".into(),
        },
    };
    v.insert(
        "upstream-record",
        canonical::to_canonical_bytes(&upstream).unwrap(),
    );
    let action = Action {
        id: "deliver-golden".into(),
        occurrence: 1,
    };
    let payload = DeliveryPayload {
        marker: marker_ref(&identity(), &action).as_str().to_owned(),
        action,
        product: "golden".into(),
        slice: Slice {
            id: "golden-slice".into(),
            revision: 3,
        },
        repository: identity(),
        candidate: digest("candidate"),
        verdict: digest("verdict"),
        commit: oid('3'),
        base: oid('1'),
        mode: DeliveryMode::Branch,
        remote: "https://git.example.org/team/golden.git".into(),
        remote_ref: "refs/heads/main".into(),
        expected: Some(oid('1')),
        owner: Owner {
            id: "owner".into(),
            generation: 1,
        },
    };
    v.insert("delivery-payload", payload.validate().unwrap());
    v.insert("delivery-marker-tag", marker_tag(&payload));
    v.insert(
        "delivery-intent-message",
        delivery_intent_message(&digest("payload")).into_bytes(),
    );
    v.insert(
        "delivery-dispatch-message",
        delivery_dispatch_message(&digest("payload"), "ffffffffffffffffffffffffffffffff")
            .into_bytes(),
    );
    v.insert(
        "delivery-receipt-delivered",
        delivery_receipt_message(&digest("payload"), &oid('3'), &ReceiptOutcome::Delivered)
            .into_bytes(),
    );
    v.insert(
        "delivery-receipt-refused",
        delivery_receipt_message(
            &digest("payload"),
            &oid('3'),
            &ReceiptOutcome::Refused("[remote rejected] (pre-receive hook declined)".into()),
        )
        .into_bytes(),
    );
}

/// The names of the refs an intent is kept under, and the marker a delivery creates on the
/// remote: an on-disk format, since a key that moved would leave every retained intent
/// unfound. The integration key has no repository in it; the delivery key has its nonce.
fn ref_name_vectors(v: &mut BTreeMap<&'static str, Vec<u8>>) {
    use sf_host::repository::{Action, delivery_refs, integration_refs, marker_ref};
    let action = Action {
        id: "golden-action".into(),
        occurrence: 2,
    };
    let integration = integration_refs(&action);
    v.insert(
        "integration-refs",
        format!(
            "{}\n{}\n{}\n",
            integration.intent, integration.dispatch, integration.receipt
        )
        .into_bytes(),
    );
    let delivery = delivery_refs(&identity(), &action);
    v.insert(
        "delivery-refs",
        format!(
            "{}\n{}\n{}\n",
            delivery.intent, delivery.dispatch, delivery.receipt
        )
        .into_bytes(),
    );
    v.insert(
        "delivery-marker-ref",
        marker_ref(&identity(), &action)
            .as_str()
            .as_bytes()
            .to_vec(),
    );
}

fn encode(value: &Value) -> Vec<u8> {
    canonical::encode(value).unwrap()
}

fn frozen() -> FrozenInputs {
    FrozenInputs {
        forbidden: Vec::new(),
        closed_paths: Default::default(),
        base: oid('1'),
        slice: Slice {
            id: "golden-slice".into(),
            revision: 3,
        },
        scope: vec!["src".into(), "README.md".into()],
        acceptance: digest("acceptance"),
        recipe: digest("recipe"),
        environment: digest("environment"),
        binding: Some(SliceBinding {
            digest: digest("slice"),
            protected: vec!["tests/**".into(), "**/conftest.py".into()],
        }),
        bounds: ProposalBounds::DEFAULT,
    }
}

fn manifest(binding: Option<SliceBinding>) -> CandidateManifest {
    let regular = |text: &str| {
        Some(ManifestEntry {
            mode: EntryMode::Regular,
            sha256: digest(text),
        })
    };
    CandidateManifest {
        protocol: if binding.is_some() {
            CandidateProtocol::V2
        } else {
            CandidateProtocol::V1
        },
        bounds: ProposalBounds::DEFAULT,
        repository: identity(),
        slice: frozen().slice,
        binding,
        scope: frozen().scope,
        acceptance: digest("acceptance"),
        recipe: digest("recipe"),
        environment: digest("environment"),
        base_commit: oid('1'),
        base_tree: oid('2'),
        commit: oid('3'),
        tree: oid('4'),
        contents: TreeContents::Files(vec![ManifestFile {
            path: "src/a.txt".into(),
            blob: oid('5'),
            sha256: digest("a"),
            bytes: 1,
        }]),
        proposal_digest: digest("proposal"),
        edits: vec![ManifestEdit {
            path: "src/a.txt".into(),
            prior: regular("old"),
            next: regular("a"),
        }],
    }
}

/// A proposal over the whole tree model, with a message and an author.
fn proposal_v2() -> Proposal {
    Proposal {
        edits: vec![
            FileEdit::text("src/a.txt", Some(digest("old")), Some("a\n".into())),
            FileEdit::bytes("src/logo.png", None, b"\x89PNG\r\n\x1a\n\x00".to_vec()),
            FileEdit::link("src/current", None, "a.txt"),
            FileEdit::mode("src/run.sh", digest("run"), EntryMode::Executable),
            FileEdit::text("src/gone.txt", Some(digest("gone")), None),
        ],
        message: Some(ProposalMessage {
            title: "Fix the greeting".into(),
            body: Some("The greeting lost its newline.\n\nFixes #12.".into()),
        }),
        author: Some(Author {
            name: "Ada Lovelace".into(),
            email: "ada@example.org".into(),
            time: 1_764_600_000,
            offset: "+0100".into(),
        }),
    }
}

/// A version 3 manifest, its edits over every kind of entry.
fn manifest_v3() -> CandidateManifest {
    let entry = |mode, text: &str| {
        Some(ManifestEntry {
            mode,
            sha256: digest(text),
        })
    };
    CandidateManifest {
        protocol: CandidateProtocol::V3,
        bounds: ProposalBounds {
            edits: 256,
            bytes: 4 * 1024 * 1024,
        },
        contents: TreeContents::Digest(digest("contents")),
        edits: vec![
            ManifestEdit {
                path: "src/a.txt".into(),
                prior: entry(EntryMode::Regular, "old"),
                next: entry(EntryMode::Regular, "a"),
            },
            ManifestEdit {
                path: "src/current".into(),
                prior: None,
                next: entry(EntryMode::Symlink, "a.txt"),
            },
            ManifestEdit {
                path: "src/run.sh".into(),
                prior: entry(EntryMode::Regular, "run"),
                next: entry(EntryMode::Executable, "run"),
            },
        ],
        ..manifest(frozen().binding)
    }
}

fn manifest_v4() -> CandidateManifest {
    CandidateManifest {
        protocol: CandidateProtocol::V4,
        contents: TreeContents::Trees {
            base: digest("base tree"),
            candidate: digest("tree"),
        },
        ..manifest_v3()
    }
}

fn identities() -> RunIdentities {
    RunIdentities {
        command: None,
        program: digest("program"),
        input: digest("input"),
        harness: digest("harness"),
        runtime: digest("runtime"),
        profile: digest("profile"),
        bounds: digest("bounds"),
        enforcement: Enforcement::from_facts([
            ("landlock-abi", "7"),
            ("landlock", "fully-enforced"),
            ("host-identity", "reserved-id"),
            ("memory", "cgroup-v1"),
        ])
        .unwrap(),
    }
}

fn answer() -> RunAnswer {
    RunAnswer {
        remote: None,
        results: None,
        status: RunStatus::Exited,
        exit_code: Some(3),
        signal: None,
        stdout: b"out\n".to_vec(),
        stderr: b"err\xff".to_vec(),
        times: RunTimes {
            wall: Duration::new(1, 500),
            user: Duration::from_millis(7),
            system: Duration::from_millis(2),
            max_rss_kib: 4096,
            memory_peak_bytes: Some(1 << 20),
        },
        bounds: RunBounds::new(Duration::from_millis(2500), 4096),
        identities: identities(),
        namespace: NamespaceDisposition::Reaped,
        problems: vec!["a problem".into()],
        limits_hit: Vec::new(),
    }
}

/// [`answer`] with two of the executor's limits hit.
fn answer_with_hits() -> RunAnswer {
    RunAnswer {
        results: None,
        limits_hit: vec![
            LimitHit::new(Limit::Processes, 1024, "pids.events max 3").unwrap(),
            LimitHit::new(Limit::Scratch, 512 << 20, "no free block").unwrap(),
        ],
        ..answer()
    }
}

fn request() -> RunRequest {
    RunRequest {
        label: None,
        program_tree: None,
        command: None,
        program: vec![file("main.sh", b"echo hi\n"), file("lib/x", b"\x00\x01")],
        entry: RunEntry::harness("run.sh"),
        args: vec!["one".into(), "two words".into()],
        input: vec![file("in.txt", b"1\n2\n")],
        harness: vec![file("run.sh", b"sh /sf/program/main.sh\n")],
        bounds: RunBounds::new(Duration::from_millis(2500), 4096),
    }
}

/// The program of [`request`] with its entry executable and a link to it.
fn tree_directory() -> sf_host::contracts::tree_digest::Directory {
    use sf_host::contracts::tree_digest::{Node, build};
    let file = |bytes: &[u8]| Node::file(false, bytes);
    let link = |target: &str| Node::Symlink {
        target: target.into(),
    };
    let built = build(vec![
        ("README.md", file(b"hello\n")),
        ("bin/run", Node::file(true, b"#!/bin/sh\necho hi\n")),
        ("docs/empty", file(b"")),
        ("docs/guide.txt", file("read me\n".repeat(40).as_bytes())),
        ("docs/up", link("../README.md")),
        ("link", link("docs/guide.txt")),
    ])
    .unwrap();
    built.directories[""].clone()
}

fn moded_program() -> Vec<SnapshotFile> {
    vec![
        SnapshotFile::executable("main.sh", b"echo hi\n".to_vec()),
        file("lib/x", b"\x00\x01"),
        SnapshotFile::symlink("lib/main", b"../main.sh".to_vec()),
    ]
}

fn recipe() -> Recipe {
    Recipe {
        collector_closure: digest("closure"),
        timeout_ms: 20_000,
        output_limit: 65_536,
        runtime: "/bin/sh".into(),
        enforcement: Enforcement::from_facts([("landlock", "fully-enforced")]).unwrap(),
    }
}

/// The recipe as version 1 wrote it: no enforcement facts (it implied Landlock's).
fn recipe_v1() -> Vec<u8> {
    let mut value = recipe().to_value();
    let Value::Object(map) = &mut value else {
        unreachable!("a recipe is an object")
    };
    map.insert("protocol".into(), "sf-repository-recipe/1".into());
    map.remove("enforcement");
    canonical::encode(&value).unwrap()
}

/// The facts of [`observation`] in the shape of version 4: without results.
fn facts_before_results(format: &str) -> Value {
    let mut value = observation().facts_value();
    let Value::Object(map) = &mut value else {
        unreachable!("facts are an object")
    };
    map.insert("protocol".into(), format.into());
    map.remove("results");
    value
}

/// The observation as version 4 wrote it: the same facts, without results.
fn observation_v4() -> Vec<u8> {
    framed_observation(
        OBSERVATION_FORMAT_V4,
        &facts_before_results(OBSERVATION_FORMAT_V4),
    )
}

/// The facts of [`observation`] in the shape of `format`, from before the limits a run hit
/// were recorded.
fn facts_before_limits(format: &str) -> Value {
    let mut value = facts_before_results(format);
    let Value::Object(map) = &mut value else {
        unreachable!("facts are an object")
    };
    let Some(Value::Object(process)) = map.get_mut("process") else {
        unreachable!("the observation has process facts")
    };
    process.remove("limitsHit");
    value
}

/// An observation of `format` with `facts` and [`observation`]'s output.
fn framed_observation(format: &str, facts: &Value) -> Vec<u8> {
    let facts = canonical::encode(facts).unwrap();
    let observation = observation();
    let mut bytes = sf_host::framing::prefix(format, facts.len());
    bytes.extend_from_slice(&facts);
    bytes.extend_from_slice(&observation.stdout);
    bytes.extend_from_slice(&observation.stderr);
    bytes
}

/// The observation as version 3 wrote it: the same facts, without the limits hit.
fn observation_v3() -> Vec<u8> {
    framed_observation(
        OBSERVATION_FORMAT_V3,
        &facts_before_limits(OBSERVATION_FORMAT_V3),
    )
}

/// The observation as version 2 wrote it: the same facts, with the run's enforcement in the
/// fixed fields.
fn observation_v2() -> Vec<u8> {
    let mut value = facts_before_limits(OBSERVATION_FORMAT_V2);
    let Value::Object(map) = &mut value else {
        unreachable!("facts are an object")
    };
    let Some(Value::Object(ids)) = map.get_mut("identities") else {
        unreachable!("the observation has identities")
    };
    ids.remove("enforcement");
    ids.insert("landlockAbi".into(), Value::Integer(7));
    for (key, text) in [
        ("landlock", "fully-enforced"),
        ("hostIdentity", "reserved-id"),
        ("memory", "cgroup-v1"),
    ] {
        ids.insert(key.into(), text.into());
    }
    framed_observation(OBSERVATION_FORMAT_V2, &value)
}

/// What the formats no longer written mean now: a version 2 or 3 observation reads as the
/// same observation with its limits not recorded, and a version 1 recipe is refused with its
/// remedy.
#[test]
fn formats_no_longer_written_read_as_they_did() {
    assert_eq!(
        Observation::decode_format(OBSERVATION_FORMAT_V4, &observation_v4()).unwrap(),
        observation()
    );
    let mut unrecorded = observation();
    if let Some(process) = unrecorded.facts.process.as_mut() {
        process.limits_hit = None;
    }
    assert_eq!(
        Observation::decode_format(OBSERVATION_FORMAT_V2, &observation_v2()).unwrap(),
        unrecorded
    );
    assert_eq!(
        Observation::decode_format(OBSERVATION_FORMAT_V3, &observation_v3()).unwrap(),
        unrecorded
    );
    let error = Recipe::from_json(&recipe_v1()).unwrap_err().to_string();
    assert!(error.contains("freeze the Slice again"), "{error}");
}

fn observation() -> Observation {
    Observation {
        facts: ObservationFacts {
            remote: None,
            collector: digest("collector"),
            candidate: digest("candidate"),
            check: "bug-fixed".into(),
            phase: Phase::After,
            stage: Stage::Candidate,
            status: ObservationStatus::Observed,
            attributable: true,
            problems: Vec::new(),
            environment: Some(digest("environment")),
            identities: Some(identities()),
            process: Some(ProcessFacts {
                status: RunStatus::Exited,
                exit_code: Some(0),
                signal: None,
                timeout_ms: 2500,
                output_limit: 4096,
                wall_ms: 12,
                user_ms: 3,
                system_ms: 1,
                max_rss_kib: 4096,
                memory_peak_bytes: Some(1 << 20),
                limits_hit: Some(vec![
                    LimitHit::new(
                        Limit::Processes,
                        1024,
                        "the run's control group refused 2 fork(s) or thread(s) (pids.events max 2)",
                    )
                    .unwrap(),
                ]),
                reaped: true,
            }),
            started_at: Some(1_800_000_000_000),
            ended_at: Some(1_800_000_000_012),
            deadline: 1_800_000_360_000,
        },
        stdout: b"6\n".to_vec(),
        stderr: Vec::new(),
        results: None,
    }
}

/// Every vector, by name.
fn vectors() -> BTreeMap<&'static str, Vec<u8>> {
    let mut v: BTreeMap<&'static str, Vec<u8>> = BTreeMap::new();
    let identity = identity();
    v.insert("identity-and-marker", identity.to_canonical_bytes());
    v.insert(
        "initial-message",
        sf_host::repository::initial_message("golden", &identity.nonce).into_bytes(),
    );
    v.insert(
        "seal-message",
        sf_host::repository::seal_message().into_bytes(),
    );
    // An import record (sf-import/1) and its record commit R, whose tree holds it alone and
    // whose parent is the imported commit.
    let record = ImportRecord {
        product: "golden".into(),
        commit: oid('1'),
        tree: oid('2'),
        source: "/home/team/repo".into(),
        rev: "refs/heads/main".into(),
        advance: true,
    };
    v.insert("import-record", record.to_bytes());
    let (record_objects, _) = record.objects();
    v.insert("import-record-tree", record_objects[1].body.clone());
    v.insert("import-record-commit", record_objects[2].body.clone());
    v.insert(
        "candidate-message-v2",
        legacy_candidate_message("golden", &frozen(), &digest("proposal")).into_bytes(),
    );
    let mut v1 = frozen();
    v1.binding = None;
    v.insert(
        "candidate-message-v1",
        legacy_candidate_message("golden", &v1, &digest("proposal")).into_bytes(),
    );
    v.insert(
        "candidate-commit",
        git_object::encode_commit(&Commit::by(
            oid('4'),
            vec![oid('1')],
            IDENT,
            legacy_candidate_message("golden", &frozen(), &digest("proposal")),
        )),
    );
    let proposal = proposal_v2();
    v.insert("proposal-v2", proposal.to_bytes().unwrap());
    v.insert(
        "proposal-v1",
        Proposal::new(vec![FileEdit::text("src/a.txt", None, Some("a\n".into()))])
            .to_bytes()
            .unwrap(),
    );
    v.insert(
        "candidate-message-v3",
        candidate_message(
            CandidateProtocol::V3,
            "golden",
            &frozen(),
            &proposal,
            &digest("proposal"),
        )
        .into_bytes(),
    );
    v.insert(
        "candidate-message-v3-untitled",
        candidate_message(
            CandidateProtocol::V3,
            "golden",
            &frozen(),
            &Proposal::new(proposal.edits.clone()),
            &digest("proposal"),
        )
        .into_bytes(),
    );
    let (author, committer) = candidate_idents(&proposal);
    v.insert(
        "candidate-commit-v3",
        git_object::encode_commit(&Commit {
            tree: oid('4'),
            parents: vec![oid('1')],
            author,
            committer,
            message: candidate_message(
                CandidateProtocol::V3,
                "golden",
                &frozen(),
                &proposal,
                &digest("proposal"),
            ),
        }),
    );
    v.insert("manifest-v3", encode(&manifest_v3().to_value()));
    v.insert("manifest-v4", encode(&manifest_v4().to_value()));
    v.insert(
        "candidate-message-v4",
        candidate_message(
            CandidateProtocol::V4,
            "golden",
            &frozen(),
            &proposal,
            &digest("proposal"),
        )
        .into_bytes(),
    );
    v.insert(
        "manifest-v2",
        encode(&manifest(frozen().binding).to_value()),
    );
    v.insert("manifest-v1", encode(&manifest(None).to_value()));
    v.insert(
        "intent-message",
        intent_message(&digest("payload")).into_bytes(),
    );
    v.insert(
        "dispatch-message",
        dispatch_message(&digest("payload"), "ffffffffffffffffffffffffffffffff").into_bytes(),
    );
    v.insert(
        "receipt-message",
        receipt_message(&digest("payload"), &oid('3')).into_bytes(),
    );
    delivery_vectors(&mut v);
    ref_name_vectors(&mut v);
    let acceptance = Acceptance::from_json(include_bytes!(
        "../../cli/src/demo/sample/slice/acceptance.json"
    ))
    .unwrap_or_else(|_| {
        // The sample names its inputs by name; freeze writes digests in their place.
        let text = include_str!("../../cli/src/demo/sample/slice/acceptance.json")
            .replace("\"numbers\"", &format!("\"{}\"", digest("numbers")))
            .replace("\"empty\"", &format!("\"{}\"", digest("empty")));
        Acceptance::from_json(text.as_bytes()).unwrap()
    });
    v.insert("acceptance", acceptance.to_bytes().unwrap());
    let recipe = recipe();
    v.insert("recipe-v2", recipe.to_bytes().unwrap());
    v.insert("recipe-v1", recipe_v1());
    let environment = EnvironmentRecord {
        runtime: digest("runtime"),
        profile: digest("profile"),
        platform: "linux/x86_64".into(),
        sf: "0.1.0".into(),
    };
    v.insert("environment", environment.to_bytes().unwrap());
    let slice = SliceRecord {
        id: "golden-slice".into(),
        revision: 3,
        repository: identity.clone(),
        base: oid('1'),
        scope: vec!["src".into()],
        protected: vec!["tests/**".into()],
        acceptance: digest("acceptance"),
        recipe: digest("recipe"),
        environment: digest("environment"),
        harness: digest("harness"),
        overlay: snapshot_digest(&[]).unwrap(),
        executor: canonical::object([
            ("type", Value::from("sandbox-exec")),
            ("runtime", Value::from("sh")),
        ]),
        bounds: None,
        forbidden: Vec::new(),
        closed: Vec::new(),
        open: Vec::new(),
    };
    v.insert("slice-record", slice.to_bytes().unwrap());
    let raised = SliceRecord {
        bounds: Some(ProposalBounds {
            edits: 256,
            bytes: 4 * 1024 * 1024,
        }),
        ..slice.clone()
    };
    v.insert("slice-record-bounds", raised.to_bytes().unwrap());
    let forbidding = SliceRecord {
        forbidden: vec!["os._exit".into(), "atexit".into()],
        ..slice.clone()
    };
    v.insert("slice-record-forbidden", forbidding.to_bytes().unwrap());
    let closing = SliceRecord {
        closed: vec![
            sf_host::repository::ClosedPath {
                pattern: "tests/**".into(),
                protects: "tests/test_x.py".into(),
                because: sf_host::repository::Because::Beside,
            },
            sf_host::repository::ClosedPath {
                pattern: "tests/test_x/**".into(),
                protects: "tests/test_x.py".into(),
                because: sf_host::repository::Because::StandsIn,
            },
        ],
        open: vec!["tests/extra/**".into()],
        ..slice.clone()
    };
    v.insert("slice-record-closed", closing.to_bytes().unwrap());
    let pins = sf_host::assurance::RepositoryPins {
        repository: identity.clone(),
        slice: sf_host::assurance::SlicePins {
            id: "golden-slice".into(),
            revision: 3,
            digest: digest("slice"),
        },
        candidate: sf_host::assurance::CandidatePins {
            digest: digest("candidate"),
            commit: oid('3'),
            snapshot: digest("candidate files"),
            program: digest("candidate program"),
        },
        base: sf_host::assurance::BasePins {
            commit: oid('1'),
            tree: oid('2'),
            snapshot: digest("base files"),
            program: digest("base program"),
        },
        harness: digest("harness"),
        acceptance: digest("acceptance"),
        recipe: digest("recipe"),
        environment: digest("environment"),
        tree_identities: false,
    };
    v.insert("pins", pins.to_bytes().unwrap());
    // Pins of programs run by reference name tree digests, and say so.
    let tree_pins = sf_host::assurance::RepositoryPins {
        tree_identities: true,
        ..pins.clone()
    };
    v.insert("pins-tree-digests", tree_pins.to_bytes().unwrap());
    let attempt = AttemptId {
        product: "golden".into(),
        epoch: 4,
    };
    v.insert("observation-v5", observation().encode().unwrap());
    // Version 4, no longer written, is still the bytes it was.
    v.insert("observation-v4", observation_v4());
    v.insert("observation-v3", observation_v3());
    v.insert("observation-v2", observation_v2());
    // The Evidence record's own format did not change: it is tested over the payload it was
    // first tested over, an observation of version 2.
    let record = EvidenceRecord::new(
        pins.digest().unwrap(),
        attempt.clone(),
        OBSERVATION_FORMAT_V2,
        &observation_v2(),
    )
    .unwrap();
    v.insert("evidence-record", record.bytes().to_vec());
    let verdict = Verdict {
        pins: digest("pins"),
        attempt: attempt.clone(),
        outcome: Outcome::Failed,
        checks: vec![CheckVerdict {
            check: "bug-fixed".into(),
            record: Some(digest("record")),
            attributable: true,
            met: Some(false),
            problems: vec!["exit code 1, expected 0".into()],
            limits_hit: Vec::new(),
        }],
        reasons: Vec::new(),
        reviews: None,
    };
    v.insert("verdict", verdict.to_bytes().unwrap());
    review_vectors(&mut v, &acceptance, &pins, &attempt, &verdict);
    v.insert(
        "snapshot-digest",
        snapshot_digest(&request().program)
            .unwrap()
            .to_string()
            .into_bytes(),
    );
    // A snapshot with an executable and a link is digested as sf-snapshot/2.
    v.insert(
        "snapshot-digest-v2",
        snapshot_digest(&moded_program())
            .unwrap()
            .to_string()
            .into_bytes(),
    );
    // An sf-tree/1 directory: the Remote Execution API's Directory message, whose digest
    // protocol buffers' own serialiser gives too (sf-contracts' tree_digest tests):
    // sha256:faff44abb876afa57dafd0a3ebf830d7620bd368f17577c042db8cd6efba3b4a, 263 bytes.
    v.insert("tree-directory", tree_directory().encode());
    v.insert(
        "bounds-digest",
        RunBounds::new(Duration::from_millis(2500), 4096)
            .digest()
            .to_string()
            .into_bytes(),
    );
    // The stored snapshot and the fence's epoch file, as written to disk.
    let (_dir, root) = sf_tests::private_dir();
    let files = vec![file("b.txt", b"bee\n"), file("a/c.bin", b"\x00\xff")];
    let snapshot = snapshot_digest(&files).unwrap();
    let store = sf_host::snapshot_store::SnapshotStore::open(&root.join("snapshots")).unwrap();
    store.put(&files, &snapshot).unwrap();
    v.insert(
        "stored-snapshot",
        std::fs::read(root.join("snapshots").join(snapshot.hex())).unwrap(),
    );
    let moded = moded_program();
    let snapshot = snapshot_digest(&moded).unwrap();
    store.put(&moded, &snapshot).unwrap();
    v.insert(
        "stored-snapshot-v2",
        std::fs::read(root.join("snapshots").join(snapshot.hex())).unwrap(),
    );
    let fence = sf_host::fence::Fence::open(&root.join("fence"), "golden").unwrap();
    fence
        .acquire(&sf_host::canonical::Digest::of(b"golden"))
        .unwrap()
        .release();
    v.insert(
        "fence-epoch",
        std::fs::read(
            root.join("fence")
                .join(format!("{}.epoch", digest("golden").hex())),
        )
        .unwrap(),
    );
    // Plugin messages. A deadline that has passed encodes as 0 ms left.
    let now = Instant::now();
    v.insert(
        "executor-run-v1",
        executor_protocol::encode_run(
            9,
            &RunRequest {
                program_tree: None,
                command: None,
                entry: RunEntry::program("main.sh"),
                harness: Vec::new(),
                ..request()
            },
            RunWire::V1,
        )
        .unwrap(),
    );
    v.insert(
        "executor-run-v2",
        executor_protocol::encode_run(9, &request(), RunWire::V2).unwrap(),
    );
    v.insert(
        "executor-answer-v1",
        executor_protocol::encode_answer(&answer(), RunWire::V1),
    );
    v.insert(
        "executor-answer-v2",
        executor_protocol::encode_answer(&answer(), RunWire::V2),
    );
    v.insert(
        "executor-run-v3",
        executor_protocol::encode_run(9, &request(), RunWire::V3).unwrap(),
    );
    v.insert(
        "executor-answer-v3",
        executor_protocol::encode_answer(&answer(), RunWire::V3),
    );
    v.insert(
        "executor-run-v4",
        executor_protocol::encode_run(
            9,
            &RunRequest {
                program_tree: None,
                command: None,
                program: moded_program(),
                ..request()
            },
            RunWire::V4,
        )
        .unwrap(),
    );
    v.insert(
        "executor-answer-v5",
        executor_protocol::encode_answer(&answer_with_hits(), RunWire::V5),
    );
    let command = sf_host::contracts::RunCommand {
        argv: vec!["python3".into(), "-m".into(), "pytest".into(), "-q".into()],
        cwd: "/sf/program/tests".into(),
        env: [("PYTHONDONTWRITEBYTECODE".to_owned(), "1".to_owned())].into(),
        environment: Some(sf_host::contracts::RunEnvironment {
            digest: digest("environment"),
            tree: "/var/lib/sf/environments/objects/e/tree".into(),
            at: "/opt/sf-envs/pytest".into(),
        }),
        results: Some(sf_host::contracts::ResultsRequest {
            path: "results.xml".into(),
            max_bytes: 1 << 20,
        }),
        resources: sf_host::contracts::RunResources {
            memory_bytes: Some(1 << 30),
            processes: Some(256),
            cpu_seconds: None,
            scratch_bytes: None,
            scratch_files: None,
        },
        scratch_executable: false,
        network: None,
        output: None,
    };
    v.insert(
        "run-command",
        canonical::encode(&command.document()).expect("a command encodes"),
    );
    v.insert(
        "executor-request-v6-command",
        executor_protocol::encode_run(
            7,
            &RunRequest {
                program_tree: None,
                command: Some(command.clone()),
                args: Vec::new(),
                program: moded_program(),
                ..request()
            },
            RunWire::V6,
        )
        .unwrap(),
    );
    let mut with_results = answer_with_hits();
    with_results.identities.command = Some(command.digest());
    with_results.results = Some(sf_host::contracts::CapturedResults::Written(
        b"<testsuites><testsuite><testcase classname=\"t\" name=\"a\"/></testsuite></testsuites>"
            .to_vec(),
    ));
    v.insert(
        "executor-answer-v6-results",
        executor_protocol::encode_answer(&with_results, RunWire::V6),
    );
    // An answer to an older host carries the limits hit as problems.
    v.insert(
        "executor-answer-v4-with-hits",
        executor_protocol::encode_answer(&answer_with_hits(), RunWire::V4),
    );
    v.insert(
        "executor-runtime",
        executor_protocol::encode_runtime(&RuntimeDescription {
            executable: "/bin/sh".into(),
            readable: vec![ReadablePath {
                path: "/usr/lib".into(),
                kind: ReadableKind::Subtree,
            }],
            digest: digest("runtime"),
        }),
    );
    v.insert(
        "executor-profile",
        executor_protocol::encode_profile(&ProfileDescription {
            recipe: b"{\"a\":1}".to_vec(),
            digest: digest("{\"a\":1}"),
        }),
    );
    v.insert(
        "executor-error",
        executor_protocol::encode_error(&ExecutorError::Unavailable {
            mechanism: "landlock".into(),
            reason: "ABI 3".into(),
        }),
    );
    v.insert("executor-cancel", executor_protocol::encode_cancel(9));
    let name = RefName::parse("refs/heads/main").unwrap();
    v.insert(
        "store-write-objects",
        object_store_protocol::encode_write_objects(
            &[EncodedObject::new(ObjectKind::Blob, b"blob\n".to_vec())],
            now,
        ),
    );
    // ABI 1.10's read scope: `begin_reads` and `end_reads` send the same empty request.
    v.insert(
        "store-read-scope",
        object_store_protocol::encode_read_scope(),
    );
    v.insert(
        "store-read-objects",
        object_store_protocol::encode_read_objects(&[oid('1'), oid('2')], 4096, now),
    );
    v.insert(
        "store-cas",
        object_store_protocol::encode_compare_and_swap_ref(&name, &oid('1'), &oid('3'), now),
    );
    v.insert(
        "store-ref-value",
        object_store_protocol::encode_ref_value(Some(&RefValue::Direct(oid('3')))),
    );
    v.insert(
        "store-ref-update",
        object_store_protocol::encode_ref_update(&RefUpdate::Refused {
            current: Some(RefValue::Direct(oid('2'))),
        }),
    );
    v.insert(
        "store-error",
        object_store_protocol::encode_error(&ObjectStoreError::Unavailable {
            reason: "the root was replaced".into(),
        }),
    );
    v.insert("gate-current", gate_protocol::encode_current(now));
    v.insert(
        "gate-answer",
        gate_protocol::encode_answer(&GateAnswer::Refuse {
            reason: "release freeze".into(),
        }),
    );
    v.insert(
        "gate-error",
        gate_protocol::encode_error(&GateError::Malformed {
            what: "proceed".into(),
        }),
    );
    v.insert(
        "evidence-put",
        evidence_store_protocol::encode_put(&record, now),
    );
    v.insert(
        "evidence-find",
        evidence_store_protocol::encode_find(&digest("pins"), now),
    );
    v.insert(
        "evidence-ids",
        evidence_store_protocol::encode_ids(&[digest("a"), digest("b")]),
    );
    v
}

#[test]
fn every_format_encodes_as_it_did() {
    let vectors = vectors();
    let actual: Vec<(&str, usize, String)> = vectors
        .iter()
        .map(|(name, bytes)| (*name, bytes.len(), Digest::of(bytes).hex().to_owned()))
        .collect();
    if std::env::var_os("SF_GOLDEN_PRINT").is_some() {
        for (name, len, hex) in &actual {
            println!("    (\"{name}\", {len}, \"{hex}\"),");
        }
    }
    let expected: BTreeMap<&str, (usize, &str)> = GOLDEN
        .iter()
        .map(|(name, len, hex)| (*name, (*len, *hex)))
        .collect();
    assert_eq!(
        expected.len(),
        GOLDEN.len(),
        "a vector is listed twice in GOLDEN"
    );
    let mut wrong = Vec::new();
    for (name, len, hex) in &actual {
        match expected.get(name) {
            Some((golden_len, golden_hex)) if golden_len == len && golden_hex == hex => {}
            Some(_) => wrong.push(format!(
                "{name}: the bytes changed; they are now:\n{}",
                String::from_utf8_lossy(&vectors[name])
            )),
            None => wrong.push(format!(
                "{name}: no golden vector; the bytes are:\n{}",
                String::from_utf8_lossy(&vectors[name])
            )),
        }
    }
    for name in expected.keys() {
        if !vectors.contains_key(name) {
            wrong.push(format!("{name}: the vector is gone"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

//! Reading and writing blobs in a cluster's CAS: which of a set it lacks
//! (`FindMissingBlobs`), uploads in batches (`BatchUpdateBlobs`) or streamed (ByteStream
//! `Write`) when a blob is too large for a batch, and downloads the same two ways, each blob
//! checked against its digest and every download bounded by a byte budget the caller gives
//! before anything is read: a blob whose digest names more is never fetched.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::time::Duration;

use tonic::transport::Channel;

use crate::digest;
use crate::proto::bytestream::byte_stream_client::ByteStreamClient;
use crate::proto::bytestream::{ReadRequest, WriteRequest};
use crate::proto::execution::content_addressable_storage_client::ContentAddressableStorageClient;
use crate::proto::execution::{
    BatchReadBlobsRequest, BatchUpdateBlobsRequest, Digest, FindMissingBlobsRequest,
    batch_update_blobs_request,
};
use crate::tree::Blobs;

/// The most bytes of blobs one batch request or answer carries: below the 4 MiB a gRPC
/// message holds by default, which is what most servers accept (BuildGrid's limit is 4 MiB
/// less 1 KiB).
pub const BATCH_BYTES: u64 = 3 * 1024 * 1024;
/// The most blobs one batch or FindMissingBlobs request names.
pub const BATCH_COUNT: usize = 500;
/// The size of one ByteStream chunk.
const CHUNK: usize = 1024 * 1024;
/// The largest message sf accepts from a cluster: a batch answer is below [`BATCH_BYTES`]
/// plus framing, a ByteStream chunk below [`CHUNK`]; an Operation or a bot session is small.
pub const MAX_MESSAGE: usize = 16 * 1024 * 1024;

/// Why a CAS call did not do what was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CasError {
    /// The call failed: the cluster's status.
    #[error("the cluster answered {}: {}", .0.code(), .0.message())]
    Rpc(#[from] tonic::Status),
    /// The cluster answered against the protocol: a wrong blob, one missing from an answer,
    /// a size it does not have.
    #[error("{0}")]
    Protocol(String),
    /// A blob asked for is larger than the budget.
    #[error("{0}")]
    TooLarge(String),
}

/// A cluster's CAS for one instance.
#[derive(Clone, Debug)]
pub struct Cas {
    channel: Channel,
    instance: String,
    timeout: Duration,
}

impl Cas {
    /// The CAS of `instance` over `channel`; each call may take at most `timeout`.
    pub fn new(channel: Channel, instance: &str, timeout: Duration) -> Self {
        Self {
            channel,
            instance: instance.to_owned(),
            timeout,
        }
    }

    fn cas(&self) -> ContentAddressableStorageClient<Channel> {
        ContentAddressableStorageClient::new(self.channel.clone())
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE)
    }

    fn byte_stream(&self) -> ByteStreamClient<Channel> {
        ByteStreamClient::new(self.channel.clone())
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE)
    }

    fn request<T>(&self, message: T) -> tonic::Request<T> {
        request(message, self.timeout)
    }

    /// The resource name prefix of the instance (`main/`, or nothing for the empty name).
    fn prefix(&self) -> String {
        if self.instance.is_empty() {
            String::new()
        } else {
            format!("{}/", self.instance)
        }
    }

    /// Which of `digests` the CAS lacks.
    pub async fn find_missing(&self, digests: &[Digest]) -> Result<Vec<Digest>, CasError> {
        let mut missing = Vec::new();
        for chunk in digests.chunks(BATCH_COUNT) {
            let mut client = self.cas();
            let call = client.find_missing_blobs(self.request(FindMissingBlobsRequest {
                instance_name: self.instance.clone(),
                blob_digests: chunk.to_vec(),
                digest_function: 0,
            }));
            let answer = bounded(self.timeout, call).await?.into_inner();
            missing.extend(answer.missing_blob_digests);
        }
        Ok(missing)
    }

    /// Uploads every blob of `blobs` the CAS lacks.
    pub async fn upload(&self, blobs: &Blobs) -> Result<(), CasError> {
        let missing = self.find_missing(&blobs.digests()).await?;
        let mut batch: Vec<(Digest, &[u8])> = Vec::new();
        let mut batch_bytes = 0;
        for digest in missing {
            let bytes = blobs.get(&digest).ok_or_else(|| {
                CasError::Protocol(format!(
                    "the cluster says it lacks {}, which was never offered",
                    digest::text(&digest)
                ))
            })?;
            let size = bytes.len() as u64;
            if size > BATCH_BYTES {
                self.write(&digest, bytes).await?;
                continue;
            }
            if batch_bytes + size > BATCH_BYTES || batch.len() == BATCH_COUNT {
                self.update(std::mem::take(&mut batch)).await?;
                batch_bytes = 0;
            }
            batch_bytes += size;
            batch.push((digest, bytes));
        }
        if !batch.is_empty() {
            self.update(batch).await?;
        }
        Ok(())
    }

    /// Uploads one blob, whether or not the CAS has it.
    pub async fn upload_one(&self, bytes: &[u8]) -> Result<Digest, CasError> {
        let digest = digest::of(bytes);
        if bytes.len() as u64 > BATCH_BYTES {
            self.write(&digest, bytes).await?;
        } else {
            self.update(vec![(digest.clone(), bytes)]).await?;
        }
        Ok(digest)
    }

    async fn update(&self, batch: Vec<(Digest, &[u8])>) -> Result<(), CasError> {
        let requests = batch
            .into_iter()
            .map(|(digest, bytes)| batch_update_blobs_request::Request {
                digest: Some(digest),
                data: bytes.to_vec(),
                compressor: 0,
            })
            .collect();
        let mut client = self.cas();
        let call = client.batch_update_blobs(self.request(BatchUpdateBlobsRequest {
            instance_name: self.instance.clone(),
            requests,
            digest_function: 0,
        }));
        let answer = bounded(self.timeout, call).await?.into_inner();
        for response in answer.responses {
            let status = response.status.unwrap_or_default();
            if status.code != 0 {
                return Err(CasError::Protocol(format!(
                    "the cluster did not store {}: status {} {}",
                    response
                        .digest
                        .as_ref()
                        .map(digest::text)
                        .unwrap_or_default(),
                    status.code,
                    status.message
                )));
            }
        }
        Ok(())
    }

    async fn write(&self, digest: &Digest, bytes: &[u8]) -> Result<(), CasError> {
        let name = format!(
            "{}uploads/{}/blobs/{}/{}",
            self.prefix(),
            hex::encode(fresh(16)),
            digest.hash,
            digest.size_bytes
        );
        let chunks: Vec<WriteRequest> = if bytes.is_empty() {
            vec![WriteRequest {
                resource_name: name,
                write_offset: 0,
                finish_write: true,
                data: Vec::new(),
            }]
        } else {
            let count = bytes.len().div_ceil(CHUNK);
            bytes
                .chunks(CHUNK)
                .enumerate()
                .map(|(n, chunk)| WriteRequest {
                    resource_name: if n == 0 { name.clone() } else { String::new() },
                    write_offset: (n * CHUNK) as i64,
                    finish_write: n + 1 == count,
                    data: chunk.to_vec(),
                })
                .collect()
        };
        let mut client = self.byte_stream();
        let call = client.write(self.request(tokio_stream::iter(chunks)));
        let answer = bounded(self.timeout, call).await?.into_inner();
        if answer.committed_size != digest.size_bytes {
            return Err(CasError::Protocol(format!(
                "the cluster committed {} bytes of {}",
                answer.committed_size,
                digest::text(digest)
            )));
        }
        Ok(())
    }

    /// Downloads `digests` (each checked against its digest), refusing before anything is
    /// read when they name more than `budget` bytes together.
    pub async fn read(&self, digests: &[Digest], budget: u64) -> Result<Blobs, CasError> {
        let unique: BTreeMap<String, Digest> = digests
            .iter()
            .map(|digest| (digest.hash.clone(), digest.clone()))
            .collect();
        let total: u64 = unique.values().map(digest::size).sum();
        if total > budget || unique.values().any(|digest| !digest::is_valid(digest)) {
            return Err(CasError::TooLarge(format!(
                "{} blobs naming {total} bytes, more than the {budget} allowed (or not \
                 SHA-256 digests)",
                unique.len()
            )));
        }
        let mut blobs = Blobs::default();
        let mut batch = Vec::new();
        let mut batch_bytes = 0;
        for digest in unique.into_values() {
            let size = digest::size(&digest);
            if size > BATCH_BYTES {
                let bytes = self.stream(&digest).await?;
                blobs.add(bytes);
                continue;
            }
            if batch_bytes + size > BATCH_BYTES || batch.len() == BATCH_COUNT {
                self.batch_read(std::mem::take(&mut batch), &mut blobs)
                    .await?;
                batch_bytes = 0;
            }
            batch_bytes += size;
            batch.push(digest);
        }
        if !batch.is_empty() {
            self.batch_read(batch, &mut blobs).await?;
        }
        Ok(blobs)
    }

    async fn batch_read(&self, batch: Vec<Digest>, blobs: &mut Blobs) -> Result<(), CasError> {
        let mut client = self.cas();
        let call = client.batch_read_blobs(self.request(BatchReadBlobsRequest {
            instance_name: self.instance.clone(),
            digests: batch.clone(),
            acceptable_compressors: Vec::new(),
            digest_function: 0,
        }));
        let answer = bounded(self.timeout, call).await?.into_inner();
        for digest in batch {
            let response = answer
                .responses
                .iter()
                .find(|response| response.digest.as_ref() == Some(&digest))
                .ok_or_else(|| {
                    CasError::Protocol(format!(
                        "the cluster's answer lacks {}",
                        digest::text(&digest)
                    ))
                })?;
            let status = response.status.clone().unwrap_or_default();
            if status.code != 0 {
                return Err(CasError::Protocol(format!(
                    "the cluster could not read {}: status {} {}",
                    digest::text(&digest),
                    status.code,
                    status.message
                )));
            }
            if response.compressor != 0 || !digest::matches(&digest, &response.data) {
                return Err(CasError::Protocol(format!(
                    "the cluster's bytes for {} are not that blob",
                    digest::text(&digest)
                )));
            }
            blobs.add(response.data.clone());
        }
        Ok(())
    }

    async fn stream(&self, digest: &Digest) -> Result<Vec<u8>, CasError> {
        bounded(self.timeout, self.read_stream(digest)).await
    }

    async fn read_stream(&self, digest: &Digest) -> Result<Vec<u8>, CasError> {
        let size = digest::size(digest);
        let mut stream = self
            .byte_stream()
            .read(self.request(ReadRequest {
                resource_name: format!(
                    "{}blobs/{}/{}",
                    self.prefix(),
                    digest.hash,
                    digest.size_bytes
                ),
                read_offset: 0,
                read_limit: digest.size_bytes,
            }))
            .await?
            .into_inner();
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0).min(64 << 20));
        while let Some(chunk) = stream.message().await? {
            if bytes.len() as u64 + chunk.data.len() as u64 > size {
                return Err(CasError::Protocol(format!(
                    "the cluster sent more than the {size} bytes of {}",
                    digest::text(digest)
                )));
            }
            bytes.extend_from_slice(&chunk.data);
        }
        if !digest::matches(digest, &bytes) {
            return Err(CasError::Protocol(format!(
                "the cluster's bytes for {} are not that blob",
                digest::text(digest)
            )));
        }
        Ok(bytes)
    }
}

/// A request that asks the server to answer within `timeout` (the grpc-timeout header).
pub fn request<T>(message: T, timeout: Duration) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.set_timeout(timeout);
    request
}

/// `call`, given up after `timeout` as `DEADLINE_EXCEEDED`: tonic sends a request's timeout to
/// the server but does not itself stop waiting, and a server that never answers must not hold
/// a run (or a worker) forever.
pub async fn bounded<T, E: From<tonic::Status>>(
    timeout: Duration,
    call: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, E> {
    match tokio::time::timeout(timeout, call).await {
        Ok(answer) => answer,
        Err(_) => Err(tonic::Status::deadline_exceeded(format!(
            "no answer within {} s",
            timeout.as_secs_f64()
        ))
        .into()),
    }
}

/// `n` bytes from the kernel's random source (a salt, an upload's name). A machine without
/// `/dev/urandom` gets bytes from the clock and the process id, which are still unique per
/// call: uniqueness is all these names need.
pub fn fresh(n: usize) -> Vec<u8> {
    let mut bytes = vec![0; n];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut file| file.read_exact(&mut bytes));
    if read.is_err() {
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let seed = format!(
            "{now}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        );
        let digest = digest::of(seed.as_bytes()).hash;
        bytes = digest.into_bytes();
        bytes.truncate(n);
    }
    bytes
}

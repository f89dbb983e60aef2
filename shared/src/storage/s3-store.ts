import { randomUUID } from 'node:crypto';
import { open, rm, type FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadBucketCommand,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
  type CompletedPart,
} from '@aws-sdk/client-s3';
import type { ObjectStore } from './object-store.ts';

/** Where the bucket is (STORAGE_BACKEND=s3; docs/operations.md, "Storage"). */
export interface S3Settings {
  bucket: string;
  /** An S3-compatible server's URL (MinIO, Ceph…); AWS's endpoint for the region where absent. */
  endpoint?: string | undefined;
  region: string;
  forcePathStyle: boolean;
  /** Where uploads spool their part being filled (STORAGE_SPOOL_DIR); the system's temporary directory where absent. */
  spoolDir?: string | undefined;
}

/**
 * The part size of a multipart upload: S3's smallest. The part being filled is spooled to a file, not
 * held in memory, so this is the disk (not the memory) an upload in progress takes at most, plus one
 * chunk of the request.
 */
export const S3_PART_BYTES = 5 * 1024 * 1024;

/** Every spool file's name starts with this: what a crashed process left behind is easy to find. */
export const SPOOL_FILE_PREFIX = 'runtasks-spool-';

/** How much of a spool file one read takes, as a part is sent from it. */
const SPOOL_READ_BYTES = 64 * 1024;

/** DeleteObjects takes at most this many keys. */
const DELETE_BATCH = 1000;

/**
 * The part of an upload not yet sent, in a file of its own (created 0600, removed by `discard`). The
 * request's chunks are appended as they arrive; a part is sent from the file once it holds enough,
 * then the file is emptied for the next.
 */
class Spool {
  readonly #path: string;
  readonly #handle: FileHandle;
  #size = 0;

  private constructor(path: string, handle: FileHandle) {
    this.#path = path;
    this.#handle = handle;
  }

  static async open(directory: string): Promise<Spool> {
    const path = join(directory, `${SPOOL_FILE_PREFIX}${randomUUID()}`);
    // 'wx+': a new file only (never one someone placed there), readable and writable by us alone.
    return new Spool(path, await open(path, 'wx+', 0o600));
  }

  /** The bytes of the part being filled: the file's length. */
  get size(): number {
    return this.#size;
  }

  async append(chunk: Buffer): Promise<void> {
    let offset = 0;
    while (offset < chunk.length) {
      const { bytesWritten } = await this.#handle.write(chunk, offset, chunk.length - offset, this.#size);
      offset += bytesWritten;
      this.#size += bytesWritten;
    }
  }

  /** The part's bytes, read from the file as the request takes them; nothing is read until it does. */
  body(): Readable {
    const handle = this.#handle;
    const size = this.size;
    async function* bytes(): AsyncGenerator<Buffer> {
      for (let position = 0; position < size;) {
        const buffer = Buffer.allocUnsafe(Math.min(SPOOL_READ_BYTES, size - position));
        const { bytesRead } = await handle.read(buffer, 0, buffer.length, position);
        if (bytesRead === 0) throw new Error('the spool file ended before its part');
        position += bytesRead;
        yield buffer.subarray(0, bytesRead);
      }
    }
    return Readable.from(bytes(), { objectMode: false, highWaterMark: 1 });
  }

  /** Empties the file once its part is sent: the disk an upload takes is then only what it has not sent yet. */
  async clear(): Promise<void> {
    await this.#handle.truncate(0);
    this.#size = 0;
  }

  /** Removes the file (whatever happened to the upload). */
  async discard(): Promise<void> {
    await this.#handle.close().catch(() => undefined);
    await rm(this.#path, { force: true });
  }
}

/** A command whose body is the spool's part: each attempt the SDK makes (it retries) reads the file afresh. */
function withSpooledBody<C extends PutObjectCommand | UploadPartCommand>(command: C, spool: Spool): C {
  // Set on the request just before it is sent, below the retry middleware: a retry must not get the stream an earlier attempt consumed.
  const middleware =
    <A extends { request: unknown }, R>(next: (args: A) => Promise<R>) =>
    (args: A): Promise<R> => {
      (args.request as { body?: unknown }).body = spool.body();
      return next(args);
    };
  const options = { step: 'deserialize', priority: 'low', name: 'runtasksSpooledBody' } as const;
  // Two calls, one per command: their stacks' overloads differ in type, not in what they take.
  if (command instanceof PutObjectCommand) command.middlewareStack.add(middleware, options);
  else command.middlewareStack.add(middleware, options);
  return command;
}

/**
 * An S3-compatible bucket: an object's bytes are one S3 object under its key. A write spools the
 * request's bytes to a temporary file, a 5 MiB part at a time, and sends each part from it with its
 * length known (a multipart upload; an object smaller than a part is one PutObject), aborting the
 * upload where the source fails. So an upload holds one chunk in memory, however slowly its client
 * sends (and a part goes to S3 at disk speed: S3 drops a request whose body pauses for ~20 s, which a
 * slow honest client streamed straight through would do). Reads stream GetObject's body as the
 * consumer takes it. No database connection is involved in either.
 *
 * Credentials come from the AWS SDK's default chain (environment, shared files, web identity, the
 * instance's role): none are in our configuration, so none can reach a log.
 */
export class S3ObjectStore implements ObjectStore {
  readonly backend = 's3' as const;
  readonly #client: S3Client;
  readonly #bucket: string;
  readonly #spoolDir: string;

  constructor(settings: S3Settings, client?: S3Client) {
    this.#bucket = settings.bucket;
    this.#spoolDir = settings.spoolDir ?? tmpdir();
    this.#client =
      client ??
      new S3Client({
        region: settings.region,
        forcePathStyle: settings.forcePathStyle,
        ...(settings.endpoint !== undefined && { endpoint: settings.endpoint }),
        // Checksums only where S3 requires them (as SDKs did before 2025): many S3-compatible servers reject the newer defaults.
        requestChecksumCalculation: 'WHEN_REQUIRED',
        responseChecksumValidation: 'WHEN_REQUIRED',
      });
  }

  async write(key: string, source: AsyncIterable<Buffer>): Promise<void> {
    const target = { Bucket: this.#bucket, Key: key };
    const spool = await Spool.open(this.#spoolDir);
    let uploadId: string | undefined;
    const parts: CompletedPart[] = [];
    const sendPart = async (id: string): Promise<void> => {
      const PartNumber = parts.length + 1;
      const sent = await this.#client.send(
        withSpooledBody(new UploadPartCommand({ ...target, UploadId: id, PartNumber, ContentLength: spool.size }), spool),
      );
      parts.push({ PartNumber, ETag: sent.ETag });
      await spool.clear();
    };
    try {
      // The next chunk is asked for only once the last is on disk (and a full part sent): the client waits meanwhile.
      for await (const chunk of source) {
        await spool.append(chunk);
        if (spool.size >= S3_PART_BYTES) {
          uploadId ??= (await this.#client.send(new CreateMultipartUploadCommand({ ...target, ContentType: 'application/octet-stream' })))
            .UploadId;
          if (uploadId === undefined) throw new Error(`CreateMultipartUpload of ${key} answered no UploadId`);
          await sendPart(uploadId);
        }
      }
      if (uploadId === undefined) {
        await this.#client.send(
          withSpooledBody(new PutObjectCommand({ ...target, ContentType: 'application/octet-stream', ContentLength: spool.size }), spool),
        );
      } else {
        if (spool.size > 0) await sendPart(uploadId);
        await this.#client.send(new CompleteMultipartUploadCommand({ ...target, UploadId: uploadId, MultipartUpload: { Parts: parts } }));
      }
    } catch (error) {
      // The parts sent are dropped (a bucket lifecycle rule catches an abort that fails). The error
      // rethrown is the first one: the source's own (a 413, a 408, an inspection's 422) is what the caller answers with.
      if (uploadId !== undefined) {
        await this.#client.send(new AbortMultipartUploadCommand({ ...target, UploadId: uploadId })).catch(() => undefined);
      }
      throw error;
    } finally {
      await spool.discard();
    }
  }

  read(key: string): Readable {
    const client = this.#client;
    const bucket = this.#bucket;
    async function* body(): AsyncGenerator<Buffer> {
      const answer = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
      if (!(answer.Body instanceof Readable)) throw new Error(`GetObject of ${key} answered no stream`);
      // Leaving this loop early (the client went away) destroys the body, and so frees its connection.
      for await (const chunk of answer.Body) yield chunk as Buffer;
    }
    return Readable.from(body(), { objectMode: false, highWaterMark: 1 });
  }

  async remove(keys: readonly string[]): Promise<void> {
    for (let start = 0; start < keys.length; start += DELETE_BATCH) {
      const batch = keys.slice(start, start + DELETE_BATCH);
      const answer = await this.#client.send(
        new DeleteObjectsCommand({ Bucket: this.#bucket, Delete: { Objects: batch.map((Key) => ({ Key })), Quiet: true } }),
      );
      // Deleting a key that holds nothing succeeds in S3; anything else reported is a failure to remove.
      const failed = (answer.Errors ?? []).filter((error) => error.Code !== 'NoSuchKey');
      if (failed.length > 0) {
        throw new Error(
          `S3 did not remove ${failed.length} object(s), e.g. ${failed[0]?.Key ?? '?'}: ${failed[0]?.Code ?? ''} ${failed[0]?.Message ?? ''}`,
        );
      }
    }
  }

  /** Whether the bucket answers (HeadBucket): readiness asks it. */
  async check(): Promise<void> {
    await this.#client.send(new HeadBucketCommand({ Bucket: this.#bucket }));
  }

  /** Closes the client's connections. */
  close(): void {
    this.#client.destroy();
  }
}

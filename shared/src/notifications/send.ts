import nodemailer, { type Transporter } from 'nodemailer';
import type { NotificationDestinationType } from '../domain/notifications.ts';
import type { DeliveryResponse } from '../db/entities/notification-configuration.entity.ts';
import { describeOutcome, type DeliveryOutcome, type TaskClient } from '../outbound/task-client.ts';
import { emailMessage, genericPayload, notificationSignature, slackPayload, teamsPayload, type NotificationFacts } from './payloads.ts';

/** Where one notification goes: a configuration's destination, its token decrypted, its recipients resolved. */
export interface NotificationTarget {
  destinationType: NotificationDestinationType;
  url: string | null;
  token: string | null;
  /** Email: every address to send to (the configuration's addresses and its users'). */
  recipients: readonly string[];
}

/** What sends: the guarded HTTP client, the SMTP transport (none without SMTP_URL), and one attempt's time limit. */
export interface NotificationSenders {
  client: TaskClient;
  mailer: Mailer | undefined;
  timeoutMs: number;
}

export interface Mailer {
  from: string;
  transport: Pick<Transporter, 'sendMail' | 'close'>;
}

/** The SMTP transport of SMTP_URL (`smtp://` or `smtps://`, credentials in the URL), or none. */
export function createMailer(smtpUrl: string | undefined, from: string): Mailer | undefined {
  if (!smtpUrl) return undefined;
  return { from, transport: nodemailer.createTransport(smtpUrl) };
}

/** How an attempt ended: delivered, to try again (a network error, 429, 5xx, an SMTP 4xx), or refused for good. */
export interface SendOutcome {
  result: 'delivered' | 'retry' | 'failed';
  response: DeliveryResponse;
  /** What a refusal's `Retry-After` asked for. */
  retryAfterMs?: number;
  error?: string;
}

/** How much of an answer's body a delivery response keeps (HCP truncates too). */
const RESPONSE_BODY_KEPT = 1024;

function responseOf(url: string, code: string, body: string, successful: boolean): DeliveryResponse {
  return {
    url,
    body: body.slice(0, RESPONSE_BODY_KEPT),
    code,
    headers: {},
    'sent-at': new Date().toISOString(),
    successful: String(successful),
  };
}

function webhookBody(target: NotificationTarget, facts: NotificationFacts): { body: Buffer; headers: Record<string, string> } {
  const payload =
    target.destinationType === 'slack'
      ? slackPayload(facts)
      : target.destinationType === 'microsoft-teams'
        ? teamsPayload(facts)
        : genericPayload(facts);
  const body = Buffer.from(JSON.stringify(payload));
  // Only generic payloads are signed, as HCP signs them.
  const signed = target.destinationType === 'generic' && target.token;
  return { body, headers: signed ? { 'x-tfe-notification-signature': notificationSignature(body, target.token ?? '') } : {} };
}

function webhookOutcome(url: string, outcome: DeliveryOutcome): SendOutcome {
  if (outcome.kind === 'response') {
    const ok = outcome.status >= 200 && outcome.status < 300;
    const retry = outcome.status === 429 || outcome.status >= 500;
    return {
      result: ok ? 'delivered' : retry ? 'retry' : 'failed',
      response: responseOf(url, String(outcome.status), outcome.bodyExcerpt, ok),
      ...(outcome.retryAfterMs === undefined ? {} : { retryAfterMs: outcome.retryAfterMs }),
      ...(ok ? {} : { error: describeOutcome(outcome) }),
    };
  }
  const error = `${describeOutcome(outcome)}: ${outcome.message}`;
  // Blocked or malformed destinations do not get better by waiting; a network error may.
  const permanent = outcome.errorKind === 'blocked' || outcome.errorKind === 'invalid_url';
  return { result: permanent ? 'failed' : 'retry', response: responseOf(url, '', error, false), error };
}

async function sendEmail(target: NotificationTarget, facts: NotificationFacts, mailer: Mailer | undefined): Promise<SendOutcome> {
  const url = `mailto:${target.recipients.join(',')}`;
  if (!mailer) {
    const error = 'email is not configured on this service (SMTP_URL is not set)';
    return { result: 'failed', response: responseOf(url, '', error, false), error };
  }
  if (target.recipients.length === 0) {
    const error = 'the configuration has no email recipients';
    return { result: 'failed', response: responseOf(url, '', error, false), error };
  }
  const message = emailMessage(facts);
  try {
    const info = await mailer.transport.sendMail({ from: mailer.from, to: [...target.recipients], ...message });
    return { result: 'delivered', response: responseOf(url, '250', String(info.response ?? ''), true) };
  } catch (caught) {
    const failure = caught as { responseCode?: number; message?: string };
    const error = `the mail server refused or was unreachable: ${failure.message ?? String(caught)}`;
    // A 5xx SMTP answer is a permanent refusal; a 4xx one or no answer at all may pass later.
    const permanent = typeof failure.responseCode === 'number' && failure.responseCode >= 500;
    return { result: permanent ? 'failed' : 'retry', response: responseOf(url, String(failure.responseCode ?? ''), error, false), error };
  }
}

/** One attempt at one notification, through the guarded client (webhooks) or SMTP (email). Never throws for the destination's sake. */
export async function sendNotification(
  target: NotificationTarget,
  facts: NotificationFacts,
  senders: NotificationSenders,
): Promise<SendOutcome> {
  if (target.destinationType === 'email') return sendEmail(target, facts, senders.mailer);
  const url = target.url ?? '';
  const { body, headers } = webhookBody(target, facts);
  return webhookOutcome(url, await senders.client.send(url, body, headers, AbortSignal.timeout(senders.timeoutMs)));
}

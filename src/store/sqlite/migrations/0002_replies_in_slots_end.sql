DROP TABLE idempotency_replies_v1;
CREATE INDEX idempotency_replies_expiry ON idempotency_replies (expires_at);

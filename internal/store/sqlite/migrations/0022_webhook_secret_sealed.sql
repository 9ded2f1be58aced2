-- A project's webhook secret, sealed like a secret (package secret): the id of the
-- key-encryption key, the data key it wrapped and the secret's ciphertext, both base64.
-- SQL cannot seal: rows made before this keep their plain-text webhook_secret, which
-- still verifies, until a coordinator with a secrets key seals them when it starts (or
-- when a delivery is verified), clearing webhook_secret.
ALTER TABLE projects ADD COLUMN webhook_key_id TEXT NOT NULL DEFAULT '';
ALTER TABLE projects ADD COLUMN webhook_wrapped_key TEXT NOT NULL DEFAULT '';
ALTER TABLE projects ADD COLUMN webhook_ciphertext TEXT NOT NULL DEFAULT '';

-- An outbound webhook subscription's signing secret, sealed like a project's inbound
-- webhook secret (0022): the id of the key-encryption key, the data key it wrapped and the
-- secret's ciphertext, both base64. SQL cannot seal: rows made before this keep their
-- plain-text secret, which still signs, until a coordinator with a secrets key seals
-- them when it starts (or gantry secret rotate-key does), clearing secret.
ALTER TABLE project_webhooks ADD COLUMN secret_key_id TEXT NOT NULL DEFAULT '';
ALTER TABLE project_webhooks ADD COLUMN secret_wrapped_key TEXT NOT NULL DEFAULT '';
ALTER TABLE project_webhooks ADD COLUMN secret_ciphertext TEXT NOT NULL DEFAULT '';

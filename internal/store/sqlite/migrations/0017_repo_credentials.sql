-- A private repository's credential comes from the project's secrets: these columns name
-- the secrets (never hold their values). repo_token_secret is an access token sent over
-- http(s) as basic auth with repo_token_user ('' = the provider's usual user name);
-- repo_ssh_key_secret a private key for an ssh remote, with repo_known_hosts_secret the
-- known_hosts lines its host must match ('' = trust on first use). '' = no credential.
ALTER TABLE projects ADD COLUMN repo_token_secret TEXT NOT NULL DEFAULT '';
ALTER TABLE projects ADD COLUMN repo_token_user TEXT NOT NULL DEFAULT '';
ALTER TABLE projects ADD COLUMN repo_ssh_key_secret TEXT NOT NULL DEFAULT '';
ALTER TABLE projects ADD COLUMN repo_known_hosts_secret TEXT NOT NULL DEFAULT '';

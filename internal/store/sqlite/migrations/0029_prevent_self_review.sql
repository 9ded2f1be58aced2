-- An environment that prevents self-review refuses the approval of the user who started
-- the run (submitted or dispatched it, or pushed what its webhook reported), as GitHub's
-- "Prevent self-review" does. Off by default: approving one's own run is allowed.
ALTER TABLE environments ADD COLUMN prevent_self_review BOOLEAN NOT NULL DEFAULT FALSE;

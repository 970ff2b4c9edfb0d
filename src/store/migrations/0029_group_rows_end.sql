-- A group's row ends with its work (docs/decisions.md#dispatch): a channel
-- whose groups are conversations or repositories gains a row per group for
-- ever otherwise. The purge deletes the row of a group with no unfinished
-- message and no post for 10 minutes; posted_at is what keeps a group that
-- is being posted to from being deleted under its new message (a post
-- writes it, and the purge's delete re-reads it after waiting for the post).
ALTER TABLE message_groups ADD COLUMN posted_at timestamptz;

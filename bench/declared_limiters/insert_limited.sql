-- The same insert into the table with an insert limit keyed by user_id.
\set u random(1, 10000)
INSERT INTO bench_limited_posts (user_id, body) VALUES (:u, 'post');

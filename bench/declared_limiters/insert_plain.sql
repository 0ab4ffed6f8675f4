-- An insert into the table without a limit, 10,000 users.
\set u random(1, 10000)
INSERT INTO bench_posts (user_id, body) VALUES (:u, 'post');

-- One policy check answered as an HTTP response, over 10,000 subjects.
\set s random(1, 10000)
SELECT ratelimit.check_http(ARRAY['bench.http'], ARRAY['subject-' || :s]);

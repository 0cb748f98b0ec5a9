-- sqlite_fill.sql - build an indexed table in an in-memory database.
--
-- Run by bench/programs/programs.py as
--     sqlite3 -batch -cmd ".parameter set @rows N" :memory: < sqlite_fill.sql
-- N rows of an integer key, an 8-digit hex key and a text value of 200 to
-- 1,399 bytes (about 800 on average), then an index on the hex key.  The
-- database lives in SQLite's page cache: with 1 KiB pages every page is one
-- malloc of a little over 1 KiB (the page and its header), the allocation
-- that dominates SQLite's memory.  The output (row count, bytes, the middle
-- key by the index, a range sum through the index) depends only on N.
PRAGMA page_size = 1024;
CREATE TABLE t(id INTEGER PRIMARY KEY, k TEXT NOT NULL, grp INTEGER NOT NULL, v TEXT NOT NULL);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < @rows)
INSERT INTO t
SELECT x,
       printf('%08x', (x * 2654435761) % 4294967296),
       x % 97,
       substr(printf('%.*c', 1400, 'v'), 1, 200 + (x * 7919) % 1200)
FROM c;
CREATE INDEX t_k ON t(k);
SELECT 'rows', count(*), sum(length(v)) FROM t;
SELECT 'middle', k FROM t ORDER BY k LIMIT 1 OFFSET @rows / 2;
SELECT 'range', count(*), sum(id) FROM t WHERE k BETWEEN '40000000' AND '4fffffff';
SELECT 'groups', count(DISTINCT grp) FROM t;

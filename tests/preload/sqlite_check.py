"""sqlite_check.py - SQLite through Python's sqlite3 module: a table of 50,000
generated rows in a database file, indexes, and queries with ORDER BY, GROUP
BY, joins and window functions.  real_sqlite.sh runs it on glibc and under
qslab-run and compares the output, which depends only on the seed."""
import os
import random
import sqlite3
import sys

path = sys.argv[1] if len(sys.argv) > 1 else "test.db"
if os.path.exists(path):
    os.remove(path)
rng = random.Random(2024)
db = sqlite3.connect(path)
db.execute("PRAGMA journal_mode=WAL")
db.execute("PRAGMA cache_size=-4000")
db.execute("CREATE TABLE item (id INTEGER PRIMARY KEY, cat TEXT, qty INTEGER, price REAL, note TEXT, blob BLOB)")
db.execute("CREATE TABLE cat (name TEXT PRIMARY KEY, weight INTEGER)")
cats = ["cat%02d" % i for i in range(40)]
db.executemany("INSERT INTO cat VALUES (?, ?)", [(c, i * 3 % 17) for i, c in enumerate(cats)])
rows = []
for i in range(50000):
    rows.append((i, cats[rng.randrange(40)], rng.randrange(1000), round(rng.random() * 100, 2),
                 "note-" + "x" * rng.randrange(0, 200), bytes(rng.randrange(0, 300))))
    if len(rows) == 5000:
        db.executemany("INSERT INTO item VALUES (?, ?, ?, ?, ?, ?)", rows)
        db.commit()
        rows = []
db.execute("CREATE INDEX item_cat ON item(cat, qty)")
db.commit()

def show(title, sql, args=()):
    print("==", title)
    for row in db.execute(sql, args):
        print(" ", row)

show("count", "SELECT count(*), sum(qty), round(sum(price), 2), sum(length(note)), sum(length(blob)) FROM item")
show("group by", "SELECT cat, count(*), sum(qty), round(avg(price), 4) FROM item GROUP BY cat ORDER BY cat")
show("order by", "SELECT id, cat, qty, price FROM item ORDER BY price DESC, id LIMIT 20")
show("order by text", "SELECT id, length(note) FROM item ORDER BY note DESC, id LIMIT 10")
show("join", "SELECT c.weight, count(*), max(i.qty) FROM item i JOIN cat c ON c.name = i.cat "
             "GROUP BY c.weight ORDER BY c.weight")
show("having", "SELECT qty % 10 AS d, count(*) FROM item GROUP BY d HAVING count(*) > 4900 ORDER BY d")
show("window", "SELECT id, cat, qty, rank() OVER (PARTITION BY cat ORDER BY qty DESC, id) AS r "
               "FROM item WHERE cat = 'cat07' ORDER BY r LIMIT 10")
show("distinct", "SELECT count(DISTINCT qty), count(DISTINCT note) FROM item")
db.execute("UPDATE item SET note = upper(note) || '!' WHERE qty < 100")
db.execute("DELETE FROM item WHERE qty > 900")
db.commit()
show("after update/delete", "SELECT count(*), sum(length(note)) FROM item")
db.execute("VACUUM")
show("integrity", "PRAGMA integrity_check")
db.close()
print("done")

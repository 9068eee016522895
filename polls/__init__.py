"""The class poll: classes, anonymous students and their answers, in a real database. No Streamlit here.

    from polls import open_store, PollError

    store = open_store()                   # $ATTENTION_LAB_DB, else data/attention_lab.sqlite3
    new = store.create_session()           # NewClass(code="K7QPM", teacher_key="kq3…"): step 0
    code, key = new.code, new.teacher_key  # the code goes on the projector; the key stays private
    store.set_step(code, key, 1)           # the question the class answers now
    token = store.join(code)               # a student's secret: keep it in that student's browser only
    store.answer(code, token, 1, "B")      # True: a first answer; False: it replaced this student's earlier one
    store.counts(code, 1, key)             # {"B": 1}: live counts need the teacher key
    store.reveal(code, key, 1, "B", ["A", "B", "C"])  # step 1 takes no more answers; B was right, of A, B, C ...
    store.counts(code, 1)                  # ... and anyone in the class may now see {"B": 1}
    store.report(code, key)                # ClassReport: per step and for the lesson
    store.rejoin(code, token)              # True: a reloaded student page is the same student
    store.student_answer(code, token, 1)   # "B": what the class counted for this student, whatever tab sent it
    store.session_info(code)               # SessionInfo(code, step=1, students=1, answered=1, revealed=True, ...)
    store.teacher_info(code, key)          # the same, once the key is checked (a reloaded teacher page)
    store.end_session(code, key)           # the class ends now

    try:
        store.join("ABCDE")
    except PollError as e:                 # a ValueError whose message a student can read:
        print(e)                           # "No class with code ABCDE — check the code on the teacher's screen."

One module per concept:

    rules.py     what the poll allows: PollError, class codes, teacher keys and student tokens, Limits
    store.py     PollStore: every operation once, on any DB-API connection; the connection pool
    sqlite.py    SQLiteStore: one file, the default
    postgres.py  PostgresStore: one database shared by several app servers
    schema.py    the tables, and the migration of a database written by an older version
    report.py    the teacher's report computed from a class's rows (ClassReport)
    settings.py  open_store: the database URL, how long a code lasts and the limits, from arguments or
                 the environment

The app (ui/lessons/) and the benchmarks use it; it imports neither.
"""
from polls.report import ClassReport, StepReport
from polls.rules import URL_ENV, Limits, PollError, normalize_code
from polls.settings import open_store
from polls.store import NewClass, PollStore, SessionInfo

__all__ = ["ClassReport", "Limits", "NewClass", "PollError", "PollStore", "SessionInfo", "StepReport", "URL_ENV",
           "normalize_code", "open_store"]

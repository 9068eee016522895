"""The teacher's report on screen shows each step's whole distribution of answers, the last choice included."""
import json

from test_lessons import join, send, start_class

from ui.lessons.steps import STEPS


def test_the_each_choice_column_is_wide_enough_for_every_choice():
    teacher, code = start_class()
    send(join(code), STEPS[0].slug, 0)
    teacher.run()
    (table,) = teacher.dataframe
    row = table.value.to_dict("records")[0]
    assert row["each choice"] == "A 1"
    columns = json.loads(table.proto.columns)
    assert columns["each choice"]["width"] == "large"

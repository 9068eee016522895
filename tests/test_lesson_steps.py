"""The lecture's order is one list: every step declared in a module of ui/lessons/steps is named in STEPS exactly
once (none declared and forgotten, none listed twice), and each is declared beside the function that builds its
figure, in the same module. The check runs on the real package, and on a made-up chapter to show what it catches."""
import importlib
import pkgutil
from collections import Counter
from types import ModuleType

import ui.lessons.steps as lecture
from ui.lessons.live import Live
from ui.lessons.steps.step import Step, lesson_step


def package_modules() -> list[ModuleType]:
    """Every module of the package, imported by name: a chapter that STEPS never mentions is found too."""
    return [importlib.import_module(f"{lecture.__name__}.{info.name}") for info in pkgutil.iter_modules(lecture.__path__)]


def order_problems(order: list[Step], modules: list[ModuleType]) -> list[str]:
    """What is wrong between the order list and the steps the modules declare; [] when nothing is."""
    declared = [(module, value) for module in modules for value in vars(module).values() if isinstance(value, Step)]
    listed = Counter(id(step) for step in order)
    problems = [f"'{step.slug}' is listed {listed[id(step)]} times" for step in {id(s): s for s in order}.values()
                if listed[id(step)] > 1]
    problems += [f"'{step.slug}' ({module.__name__}) is declared but not in the order"
                 for module, step in declared if id(step) not in listed]
    known = {id(step) for _, step in declared}
    problems += [f"'{step.slug}' is in the order but declared in none of the modules"
                 for step in order if id(step) not in known]
    problems += [f"'{step.slug}' is declared in {module.__name__} but built in {step.build.__module__}"
                 for module, step in declared if step.build.__module__ != module.__name__]
    return problems


def test_the_order_names_every_declared_step_once_each_beside_its_figure_builder():
    modules = package_modules()
    assert {"modern", "attention", "before_attention"} <= {m.__name__.rsplit(".", 1)[1] for m in modules}
    assert order_problems(lecture.STEPS, modules) == []
    assert len({step.slug for step in lecture.STEPS}) == len(lecture.STEPS)  # a slug names one step in the URL


def test_the_check_catches_a_forgotten_step_a_repeated_one_and_a_figure_built_elsewhere():
    def build() -> Live:
        raise AssertionError("never built here")

    chapter = ModuleType("made_up_chapter")
    words = dict(text="", question="", kind="choice", try_this="", page=None)
    chapter.forgotten = lesson_step("forgotten", "Forgotten", **words)(build)  # build's module is this test file
    chapter.listed = lesson_step("listed", "Listed", **words)(build)
    assert order_problems([chapter.listed, chapter.listed], [chapter]) == [
        "'listed' is listed 2 times",
        "'forgotten' (made_up_chapter) is declared but not in the order",
        f"'forgotten' is declared in made_up_chapter but built in {__name__}",
        f"'listed' is declared in made_up_chapter but built in {__name__}",
    ]
    assert order_problems([lecture.STEPS[0]], [chapter]) == [
        "'forgotten' (made_up_chapter) is declared but not in the order",
        "'listed' (made_up_chapter) is declared but not in the order",
        f"'{lecture.STEPS[0].slug}' is in the order but declared in none of the modules",
        f"'forgotten' is declared in made_up_chapter but built in {__name__}",
        f"'listed' is declared in made_up_chapter but built in {__name__}",
    ]

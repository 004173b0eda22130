"""run/step.py and run/outcome.py: the Step records a run keeps and what is derived from them."""

from thinkflow.model.messages import ToolCall
from thinkflow.reply.actions import FinalAnswer, ToolAction
from thinkflow.run.outcome import STATUSES, Outcome
from thinkflow.run.step import CallOutcome, Step, calls_run, partial_answer, tool_results


def calls_step(number: int, *outcomes: CallOutcome, admitted: int = 0, thought: str = "") -> Step:
    action = ToolAction(calls=[o.call for o in outcomes], thought=thought)
    return Step(number=number, action=action, calls=list(outcomes), admitted=admitted)


def test_statuses_are_the_closed_set_and_an_outcome_carries_its_answer():
    assert STATUSES == ("completed", "max_steps", "timeout", "budget_exceeded", "loop_detected", "invalid_output",
                        "model_error", "interrupted")
    ended = Outcome("max_steps", error="reached max_steps (3) without a final answer")
    assert (ended.completed, ended.answer) == (False, "")
    assert ended.with_answer("partial") == Outcome("max_steps", "partial", ended.error)
    assert Outcome("completed", "4").completed


def test_partial_answer_prefers_a_rejected_answer_then_the_last_observation_then_reasoning():
    add = ToolCall("c1", "calculator", {"expression": "2+2"})
    skipped = ToolCall("c2", "calculator", {"expression": "2+2"})
    first = calls_step(1, CallOutcome(add, "ok", "4", ran=True), admitted=1, thought="add them")
    second = calls_step(2, CallOutcome(skipped, "skipped", "Warning: ...", {"reason": "repetition"}))
    assert partial_answer([]) == ""
    assert partial_answer([Step(1, action=ToolAction(calls=[], thought="thinking"))]) == "thinking"
    assert partial_answer([first, second]) == "No final answer was reached. Last result (calculator): 4"
    rejected = Step(3, action=FinalAnswer("{bad json"), error="the final answer does not match output_schema")
    assert partial_answer([first, rejected, second]) == "{bad json"
    assert calls_run([first, second]) == 1
    assert tool_results([first, second]) == [("calculator", {"expression": "2+2"}, "4")]

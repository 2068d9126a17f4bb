"""The Python package against `kestrel run` on a real model.

    KESTREL_TEST_MODEL=model.vqf KESTREL_BIN=target/release/kestrel python3 -m unittest discover python/tests

(scripts/capi.sh test runs it in a fresh venv with the package installed by
`pip install ./python`, on the real 0.5B file.) Both variables are required:
a missing one is a failure, not a skip."""
import json
import os
import subprocess
import tempfile
import unittest

import kestrel

MODEL = os.environ.get("KESTREL_TEST_MODEL", "")
BIN = os.environ.get("KESTREL_BIN", "")
PROMPT = "Write a Python function that checks whether a number is prime."


def kestrel_run(*args):
    return subprocess.run([BIN, "run", MODEL, *args], check=True, capture_output=True, text=True).stdout


class Package(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not (os.path.isfile(MODEL) and os.path.isfile(BIN)):
            raise RuntimeError(f"set KESTREL_TEST_MODEL (a VQF file: {MODEL!r}) and KESTREL_BIN (kestrel: {BIN!r})")
        cls.model = kestrel.Model(MODEL)

    def greedy(self):
        return self.model.session(temperature=0)

    def test_the_answer_is_kestrel_runs(self):
        want = kestrel_run("-p", PROMPT, "-n", "48", "--temp", "0")
        with self.greedy() as s:
            self.assertTrue(s.kernels)
            text = s.chat(PROMPT, max_tokens=48)
        self.assertEqual(text + "\n", want)
        with self.greedy() as s:
            self.assertEqual("".join(s.stream(PROMPT, max_tokens=48)) + "\n", want)

    def test_a_turn_after_a_cut_answer_is_a_fresh_feed_of_the_conversation(self):
        with self.greedy() as a:
            a.chat(PROMPT, max_tokens=8)
            a.feed(a.chat_turn("Shorter, please."))
            conversation = a.history
            answer = a.generate(12)[0]
        with self.greedy() as b:
            b.feed(conversation)
            self.assertEqual(b.generate(12)[0], answer)

    def test_two_turns_after_a_cut_answer_are_kestrel_chats(self):
        # kestrel chat closes an answer cut by -n before the next turn; the
        # library's chat_turn does the same.
        chat = subprocess.run([BIN, "chat", MODEL, "--temp", "0", "-n", "24"], input=f"{PROMPT}\nShorter, please.\n",
                              check=True, capture_output=True, text=True).stdout
        with self.greedy() as s:
            both = s.chat(PROMPT, max_tokens=24) + s.chat("Shorter, please.", max_tokens=24)
        self.assertEqual(both, chat)

    def test_a_state_kestrel_chat_saved_mid_answer_goes_on_here(self):
        # kestrel chat's /save after an answer cut by -n keeps its last
        # row's logits, so the library loading it closes that answer before
        # the next turn, as kestrel chat's own next turn does.
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "chat.kstate")
            chat = subprocess.run([BIN, "chat", MODEL, "--temp", "0", "-n", "24"],
                                  input=f"{PROMPT}\n/save {path}\nShorter, please.\n",
                                  check=True, capture_output=True, text=True).stdout
            with open(path, "rb") as f:
                saved = f.read()
        with self.greedy() as s:
            first = s.chat(PROMPT, max_tokens=24)
        with self.greedy() as s:
            s.load_state(saved)
            self.assertEqual(first + s.chat("Shorter, please.", max_tokens=24), chat)

    def test_saved_state_and_rollback(self):
        with self.greedy() as a:
            a.chat(PROMPT, max_tokens=16)
            turn1 = len(a.history)
            saved = a.save_state()
            second = a.chat("Now in Rust.", max_tokens=12)
            with self.greedy() as b:
                b.load_state(saved)
                self.assertEqual(b.history, a.history[:turn1])
                self.assertEqual(b.chat("Now in Rust.", max_tokens=12), second)
            a.rollback(turn1)
            self.assertEqual(len(a.history), turn1)
            self.assertEqual(a.chat("Now in Rust.", max_tokens=12), second)
            with self.assertRaises(kestrel.StateError):
                a.load_state(b"not a state")
            with self.assertRaises(kestrel.ArgumentError):
                a.rollback(10**6)

    def test_sampling_changes_per_call_and_is_checked(self):
        with self.model.session(temperature=0.9, seed=5) as s:
            first = s.tokenize("x")
            self.assertTrue(first)
            s.set_sampling(temperature=0)
            self.assertEqual(s.sampling["temperature"], 0.0)
            self.assertEqual(s.chat(PROMPT, max_tokens=24) + "\n", kestrel_run("-p", PROMPT, "-n", "24", "--temp", "0"))
            for bad in ({"temperature": float("nan")}, {"top_p": 7.0}, {"min_p": -3.0}):
                with self.assertRaises(kestrel.ArgumentError) as e:
                    s.set_sampling(**bad)
                self.assertIn(next(iter(bad)), e.exception.message)
            self.assertEqual(s.sampling["temperature"], 0.0)
            with self.assertRaises(kestrel.ArgumentError):
                s.set_sampling(warmth=1)

    def test_typed_errors(self):
        with self.greedy() as s:
            with self.assertRaises(kestrel.TokenError):
                s.feed([s.vocab])
            with self.assertRaises(kestrel.OrderError):
                s.generate(4)
        with self.assertRaises(kestrel.ModelError):
            path = os.path.join(os.path.dirname(MODEL), "not-a-model.vqf")
            with open(path, "wb") as f:
                f.write(b"\0" * 4096)
            try:
                kestrel.Model(path)
            finally:
                os.remove(path)

    def test_cancel_stops_the_answer_after_the_token_in_hand(self):
        # kestrel_cancel is the one call allowed from inside a callback: the
        # first piece cancels, so the answer stops there whatever the
        # machine's speed (the Rust tests cancel from another thread).
        with self.greedy() as s:
            prompt = s.chat_turn(PROMPT)
            s.feed(prompt)
            with self.assertRaises(kestrel.CancelledError):
                s.generate(400, on_text=lambda _piece: s.cancel())
            self.assertFalse(s.running)
            self.assertLessEqual(len(s.history), len(prompt) + 2, "stopped at the first token")


    def test_logits_are_kestrel_logits_and_embeddings_are_unit_vectors(self):
        import math
        import struct
        import tempfile
        with self.greedy() as s:
            prompt = s.chat_turn(PROMPT)
            s.feed(prompt)
            logits = s.logits()
            with tempfile.TemporaryDirectory() as d:
                out = os.path.join(d, "rows.f32")
                subprocess.run([BIN, "logits", MODEL, "--tokens", ",".join(map(str, prompt)), "--batch", "128",
                                "--out", out], check=True, capture_output=True)
                with open(out, "rb") as f:
                    raw = f.read()
            last = list(struct.unpack(f"<{s.vocab}f", raw[-4 * s.vocab:]))
            self.assertEqual(logits, last)
            best = max(range(s.vocab), key=lambda i: (logits[i], -i))
            self.assertEqual(next(s.tokens(1))[0], best)

            cat = s.embed("The cat sat on the mat.")
            self.assertFalse(s.history, "the conversation is forgotten")
            self.assertAlmostEqual(math.fsum(v * v for v in cat), 1.0, places=5)
            self.assertEqual(s.embed("The cat sat on the mat."), cat)
            self.assertNotEqual(s.embed("The cat sat on the mat.", pooling="last"), cat)
            cos = lambda a, b: math.fsum(x * y for x, y in zip(a, b))
            near, far = s.embed("A cat was sitting on the mat."), s.embed("Stock markets fell sharply today.")
            self.assertGreater(cos(cat, near), cos(cat, far))
            with self.assertRaises(kestrel.ArgumentError):
                s.embed("x", pooling="max")
            with self.assertRaises(kestrel.OrderError):
                s.logits()


    def test_stop_strings_cut_the_answer_before_them(self):
        with self.greedy() as s:
            whole = s.chat(PROMPT, max_tokens=48)
        cut = whole[20:26]
        with self.greedy() as s:
            s.set_stop_strings(["\x01never", cut])
            self.assertEqual(s.chat(PROMPT, max_tokens=48), whole[: whole.find(cut)])
            with self.assertRaises(kestrel.ArgumentError):
                s.set_stop_strings(["a", "b", "c", "d", "e"])
        with self.greedy() as s:
            s.set_stop_strings([cut])
            s.set_stop_strings([])
            self.assertEqual(s.chat(PROMPT, max_tokens=48), whole)

    def test_json_schema_answers_are_kestrel_runs_and_valid(self):
        schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                  "legs": {"type": "integer", "minimum": 0, "maximum": 8}},
                  "required": ["name", "legs"], "additionalProperties": False}
        prompt = "Describe a cat as JSON."
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            json.dump(schema, f)
            f.flush()
            want = kestrel_run("-p", prompt, "-n", "96", "--temp", "0", "--json-schema", f.name)
        with self.greedy() as s:
            s.set_json_schema(schema)
            text = s.chat(prompt, max_tokens=96)
            with self.assertRaises(kestrel.ArgumentError) as refused:
                s.set_json_schema({"type": "object", "properties": {"s": {"type": "string", "pattern": "(?=a)"}}})
            self.assertIn("properties.s", str(refused.exception))
            # The schema set before holds, for the next answer from its start.
            second = json.loads(s.chat("Another one.", max_tokens=96))
            self.assertEqual(sorted(second), ["legs", "name"])
        self.assertEqual(text + "\n", want)
        value = json.loads(text)
        self.assertEqual(sorted(value), ["legs", "name"])
        self.assertTrue(0 <= value["legs"] <= 8 and len(value["name"]) <= 20)

    def test_a_prediction_drafts_the_same_answer(self):
        with self.greedy() as s:
            want = s.chat(PROMPT, max_tokens=48)
        drafting = kestrel.Model(MODEL, draft=8)
        with drafting.session(temperature=0) as s:
            s.set_drafting(8, prediction=want)
            self.assertEqual(s.chat(PROMPT, max_tokens=48), want)
            drafted, accepted = s.draft_stats()
            self.assertGreater(accepted, 16)
            self.assertGreaterEqual(drafted, accepted)
            with self.assertRaises(kestrel.ArgumentError):
                s.set_drafting(9)

    def test_chat_messages_answer_as_kestrel_run_with_a_system_prompt(self):
        want = kestrel_run("-p", PROMPT, "-n", "24", "--temp", "0", "--system", "You are terse.")
        with self.greedy() as s:
            s.feed(s.chat_messages([{"role": "system", "content": "You are terse."},
                                    {"role": "user", "content": PROMPT}]))
            self.assertEqual(s.generate(24)[0] + "\n", want)
            with self.assertRaises(kestrel.ArgumentError):
                s.chat_messages([{"role": "robot", "content": "x"}])

    def test_logit_bias_bans_a_token(self):
        with self.greedy() as s:
            prompt = s.chat_turn(PROMPT)
            s.feed(prompt)
            whole = [t for t, _ in s.tokens(8) if t is not None]
            s.rollback(0)
            s.set_logit_bias({whole[0]: -100})
            s.feed(prompt)
            banned = [t for t, _ in s.tokens(8) if t is not None]
            self.assertNotEqual(banned[0], whole[0])
            with self.assertRaises(kestrel.ArgumentError):
                s.set_logit_bias({whole[0]: 101})
            s.set_logit_bias({})
            s.rollback(0)
            s.feed(prompt)
            self.assertEqual([t for t, _ in s.tokens(8) if t is not None], whole)

    def test_a_conversation_longer_than_the_context_drops_its_oldest_turns(self):
        small = kestrel.Model(MODEL, context=160)
        questions = [f"Name a prime number above {10 * i}." for i in range(8)]
        with small.session(temperature=0) as s:
            with self.assertRaises(kestrel.ContextError):
                for q in questions:
                    s.chat(q, max_tokens=12)
        with small.session(temperature=0) as s:
            s.set_context_policy(keep=0)
            answers = [s.chat(q, max_tokens=12) for q in questions]
            self.assertTrue(all(answers))
            self.assertLessEqual(len(s.history), 160)


if __name__ == "__main__":
    unittest.main()

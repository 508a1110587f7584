"""SQuAD 1.1 reader with checked input (paper Sec. 4, question answering).

Tokenisation, span alignment and fields are allennlp-models' ``squad`` reader (v1.1 setting: no no-answer token).
Its own loop would fail with a bare JSONDecodeError/KeyError on a malformed file and read an empty one silently,
so this subclass walks the JSON itself, checking each record, and raises a one-line error naming the file and the
key path (data[i].paragraphs[j].qas[k]...) of the bad record. It also checks that each answer's text is found at
answer_start in the context, as the official data guarantees. A path ``hf:squad:validation`` reads the hub's copy,
regrouped into the official layout (tasks/hub_data.py).
"""
import json
from typing import Iterable, List, Optional

from allennlp.data import DatasetReader, Instance
from allennlp.data.tokenizers import Tokenizer
from allennlp_models.rc.dataset_readers.squad import SquadReader

from tasks import hub_data
from tasks.hub_data import is_hub_path
from tasks.line_errors import empty_file_error, input_error, json_error, read_text


def _require(file_path, where: str, record, key: str, kind):
    if not isinstance(record, dict) or not isinstance(record.get(key), kind):
        found = record.get(key) if isinstance(record, dict) else record
        raise input_error(file_path, where, f"'{key}' ({kind.__name__})", repr(found))
    return record[key]


def file_document(file_path) -> dict:
    text = read_text(file_path, "SQuAD 1.1 JSON")
    if not text.strip():
        raise empty_file_error(file_path, "a SQuAD JSON document")
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise json_error(file_path, error.lineno, "valid JSON", error, text) from None


def hub_document(path) -> dict:
    """A hub SQuAD split (hf:squad:validation; one record per question) regrouped into the official JSON layout."""
    articles: List[dict] = []
    for record in hub_data.load_hub_split(path):
        if not articles or articles[-1]["title"] != record["title"]:
            articles.append({"title": record["title"], "paragraphs": []})
        paragraphs = articles[-1]["paragraphs"]
        if not paragraphs or paragraphs[-1]["context"] != record["context"]:
            paragraphs.append({"context": record["context"], "qas": []})
        answers = [
            {"text": text, "answer_start": start}
            for text, start in zip(record["answers"]["text"], record["answers"]["answer_start"])
        ]
        paragraphs[-1]["qas"].append({"id": record["id"], "question": record["question"], "answers": answers})
    return {"data": articles}


@DatasetReader.register("squad1_checked")
class CheckedSquad1Reader(SquadReader):
    def __init__(
        self,
        tokenizer: Optional[Tokenizer] = None,
        passage_length_limit: Optional[int] = None,
        question_length_limit: Optional[int] = None,
        skip_impossible_questions: bool = False,
        **kwargs,
    ) -> None:
        super().__init__(
            tokenizer=tokenizer,
            passage_length_limit=passage_length_limit,
            question_length_limit=question_length_limit,
            skip_impossible_questions=skip_impossible_questions,
            no_answer_token=None,
            **kwargs,
        )

    def _read(self, file_path) -> Iterable[Instance]:
        document = hub_document(file_path) if is_hub_path(file_path) else file_document(file_path)
        articles = _require(file_path, "top level", document, "data", list)
        found_any = False
        for i, article in enumerate(articles):
            paragraphs = _require(file_path, f"data[{i}]", article, "paragraphs", list)
            for j, paragraph in enumerate(paragraphs):
                where = f"data[{i}].paragraphs[{j}]"
                context = _require(file_path, where, paragraph, "context", str)
                questions = _require(file_path, where, paragraph, "qas", list)
                passage_tokens = self._tokenizer.tokenize(context)
                for k, qa in enumerate(self.shard_iterable(questions)):
                    qa_where = f"{where}.qas[{k}]"
                    question = _require(file_path, qa_where, qa, "question", str)
                    answers = _require(file_path, qa_where, qa, "answers", list)
                    if not answers:  # SQuAD 1.1 answers every question; v2.0's unanswerable ones are not supported
                        raise input_error(file_path, f"{qa_where}.answers", "at least one answer (SQuAD 1.1)",
                                          "[] (an unanswerable question, as in SQuAD 2.0?)")
                    texts, spans = [], []
                    for a, answer in enumerate(answers):
                        answer_where = f"{qa_where}.answers[{a}]"
                        answer_text = _require(file_path, answer_where, answer, "text", str)
                        start = _require(file_path, answer_where, answer, "answer_start", int)
                        if context[start : start + len(answer_text)] != answer_text:
                            raise input_error(
                                file_path,
                                answer_where,
                                f"the answer text {answer_text!r} at answer_start {start} of the context",
                                repr(context[start : start + len(answer_text)]),
                            )
                        texts.append(answer_text)
                        spans.append((start, start + len(answer_text)))
                    found_any = True
                    instance = self.text_to_instance(
                        question.strip().replace("\n", ""),
                        context,
                        char_spans=spans,
                        answer_texts=texts,
                        passage_tokens=passage_tokens,
                        additional_metadata={"id": qa.get("id")},
                    )
                    if instance is not None:
                        yield instance
        if not found_any:
            raise empty_file_error(file_path, "SQuAD questions")

import io

from elmo_module.progress import progress_bar


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_a_bar_written_to_a_log_file_redraws_rarely_and_on_a_terminal_often():
    logged = progress_bar(total=10, file=io.StringIO())
    shown = progress_bar(total=10, file=FakeTerminal())
    assert logged.mininterval == 30.0 and shown.mininterval == 0.5
    assert progress_bar(total=10, file=io.StringIO(), log_interval=5).mininterval == 5
    for bar in (logged, shown):
        bar.close()

"""Downstream tasks of the ELMo paper (Sec. 4): one sub-package per task, and what they share. Importing it registers
nothing and changes nothing in the process: ``tasks.allennlp_plugin`` is what ``allennlp`` loads."""

// kiln generate, chat and bench-llm.
#pragma once

#include <string>

/* Usage lines for the language-model commands. */
const char* llm_usage();
/* Runs cmd ("generate", "chat" or "bench-llm") with argv[2...]; throws kiln::Error on bad input. */
int cmd_llm(const std::string& cmd, int argc, char** argv);

import AppBoxCLI; AppBoxCommandLine.main()

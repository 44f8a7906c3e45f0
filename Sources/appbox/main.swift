import AppBoxCLI;

AppBoxCommandLine.main()

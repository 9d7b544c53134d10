#include "report.h"

int main(void)
{
    return consumer_report();
}
